// route_edit: route_edit.insert_orders as one launch, a thread per edited route (the array code
// in kernels/route_edit.py is its twin: the same values in the same slots, bit for bit, since
// only copies are made). tests/kernels/route_edit_host_harness.cu includes this source to run it
// on a CPU.
//
// Layouts (row-major; L = n_slots, K = number of routes edited, k = this thread's entry):
//   stop arrays    float[R, L] (stop_xy float[R, L, 2]), owner int[R, L], n_stops and
//                  insert_limit int[R]: edited in place (the launcher passes grown copies, at
//                  least n_stops[rows[k]] + 2 slots wide)
//   rows           long long[K]  the routes edited, distinct
//   order arrays   O orders as OrderArrays (xy float[O, 2], has_pickup unsigned char[O])
//   order_of       long long[K]  the order that goes into route rows[k]
//   pickup_pos, dropoff_pos   int[K]  i and j in the route before the edit (insertion_costs)
//   keys           int[K]  the owner key of the new stops

#ifdef __CUDA_ARCH__
#define ORML_EDIT_INF __int_as_float(0x7f800000)
#else
#define ORML_EDIT_INF __builtin_huge_valf()
#endif

__host__ __device__ inline void orml_put_stop(long long at, float x, float y, float ready,
                                              float due, float latest, float service, float load,
                                              int key, float* stop_xy, float* stop_ready,
                                              float* stop_due, float* stop_latest,
                                              float* stop_service, float* stop_load, int* owner) {
    stop_xy[2 * at] = x;
    stop_xy[2 * at + 1] = y;
    stop_ready[at] = ready;
    stop_due[at] = due;
    stop_latest[at] = latest;
    stop_service[at] = service;
    stop_load[at] = load;
    owner[at] = key;
}

// Route rows[k] with order order_of[k]'s stops at (i, j), slots rewritten from the last one down: slot s
// reads slot s - (s > i) - (s > j') <= s of the route before, which no earlier step of this
// loop has written (the same gather as the array code's, in place).
__host__ __device__ inline void orml_insert_row(
    long long k, const long long* rows, const long long* order_of, int n_slots, float* stop_xy,
    float* stop_ready,
    float* stop_due, float* stop_latest, float* stop_service, float* stop_load, int* owner,
    int* n_stops, int* insert_limit, const float* pickup_xy, const float* dropoff_xy,
    const float* ready, const float* pickup_latest, const float* due, const float* dropoff_latest,
    const float* dropoff_ready, const float* pickup_service, const float* dropoff_service,
    const float* size, const unsigned char* has_pickup, const int* pickup_pos,
    const int* dropoff_pos, const int* keys) {
    const float inf = ORML_EDIT_INF;
    const long long r = rows[k];
    const long long o = order_of[k];
    const long long base = r * n_slots;
    const bool hp = has_pickup[o] != 0;
    const int i = hp ? pickup_pos[k] : n_slots + 1;  // no pickup: a slot never reached
    const int d = hp ? dropoff_pos[k] + 1 : dropoff_pos[k];
    const int added = hp ? 2 : 1;
    const int n_new = n_stops[r] + added;
    for (int s = n_slots - 1; s >= 0; --s) {
        const long long at = base + s;
        if (s >= n_new) {  // padding, as kernels/arrays.py STOP_PADDING states it
            orml_put_stop(at, 0.0f, 0.0f, -inf, inf, inf, 0.0f, 0.0f, -1, stop_xy, stop_ready,
                          stop_due, stop_latest, stop_service, stop_load, owner);
        } else if (s == i) {
            orml_put_stop(at, pickup_xy[2 * o], pickup_xy[2 * o + 1], ready[o], inf,
                          pickup_latest[o], pickup_service[o], size[o], keys[k], stop_xy,
                          stop_ready, stop_due, stop_latest, stop_service, stop_load, owner);
        } else if (s == d) {
            orml_put_stop(at, dropoff_xy[2 * o], dropoff_xy[2 * o + 1], dropoff_ready[o], due[o],
                          dropoff_latest[o], dropoff_service[o], -size[o], keys[k], stop_xy,
                          stop_ready, stop_due, stop_latest, stop_service, stop_load, owner);
        } else {
            int src = s - (s > i ? 1 : 0) - (s > d ? 1 : 0);
            src = src < 0 ? 0 : src;
            const long long from = base + src;
            orml_put_stop(at, stop_xy[2 * from], stop_xy[2 * from + 1], stop_ready[from],
                          stop_due[from], stop_latest[from], stop_service[from], stop_load[from],
                          owner[from], stop_xy, stop_ready, stop_due, stop_latest, stop_service,
                          stop_load, owner);
        }
    }
    n_stops[r] = n_new;
    insert_limit[r] += added;
}

extern "C" __global__ void orml_insert_orders(
    const long long* rows, const long long* order_of, int n_rows, int n_slots, float* stop_xy,
    float* stop_ready,
    float* stop_due, float* stop_latest, float* stop_service, float* stop_load, int* owner,
    int* n_stops, int* insert_limit, const float* pickup_xy, const float* dropoff_xy,
    const float* ready, const float* pickup_latest, const float* due, const float* dropoff_latest,
    const float* dropoff_ready, const float* pickup_service, const float* dropoff_service,
    const float* size, const unsigned char* has_pickup, const int* pickup_pos,
    const int* dropoff_pos, const int* keys) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_rows) return;
    orml_insert_row(k, rows, order_of, n_slots, stop_xy, stop_ready, stop_due, stop_latest,
                    stop_service, stop_load, owner, n_stops, insert_limit, pickup_xy, dropoff_xy,
                    ready,
                    pickup_latest, due, dropoff_latest, dropoff_ready, pickup_service,
                    dropoff_service, size, has_pickup, pickup_pos, dropoff_pos, keys);
}
