// insertion_costs: the CUDA twin of kernels/insertion_costs.py::_numpy_loop.
//
// One thread prices one (route, order) pair: every pickup position i and drop-off position j
// (0 <= i <= j <= insert_limit), keeping the cheapest feasible placement. The arithmetic is the
// NumPy loop's, operation for operation, in float32; compile with --fmad=false so that no
// multiply-add is fused and both paths round identically (the tests hold them equal).
//
// orml_best_insertion is __host__ __device__ so that tests/kernels/insertion_host_harness.cu can
// run this very source on a CPU when no GPU is present.
//
// Array layouts (row-major, contiguous; L = n_slots):
//   node_xy      float[R, L+2, 2]   node 0 = start, node q+1 = stop q
//   ctx arrays   float[R, L+1]      depart_prev, leg, arrival, cum_wait, soft, hard,
//                                   soft_min, hard_min, load_before (see RouteContext)
//   per route    speed, capacity float[R]; n_stops, insert_limit int[R]
//   per order    pickup_xy, dropoff_xy float[O, 2]; ready, pickup_latest, due, dropoff_latest,
//                dropoff_ready, pickup_service, dropoff_service, size float[O];
//                has_pickup unsigned char[O]
//   outputs      cost, travel, lateness, dropoff_arrival float[N]; pickup_pos, dropoff_pos int[N]
//                N = R*O (grid, index r*O + o) or R (pairs, order index = r)

#ifdef __CUDA_ARCH__
#define ORML_INF __int_as_float(0x7f800000)
#else
#define ORML_INF __builtin_huge_valf()
#endif

struct OrmlRoutes {
    const float* node_xy;
    const float* depart_prev;
    const float* leg;
    const float* arrival;
    const float* cum_wait;
    const float* soft;
    const float* hard;
    const float* soft_min;
    const float* hard_min;
    const float* load_before;
    const float* speed;
    const float* capacity;
    const int* n_stops;
    const int* insert_limit;
    int n_slots;
};

struct OrmlOrders {
    const float* pickup_xy;
    const float* dropoff_xy;
    const float* ready;
    const float* pickup_latest;
    const float* due;
    const float* dropoff_latest;
    const float* dropoff_ready;
    const float* pickup_service;
    const float* dropoff_service;
    const float* size;
    const unsigned char* has_pickup;
};

struct OrmlBest {
    float cost;
    float travel;
    float lateness;
    float arrival;  // planned arrival at the new drop-off
    int i;
    int j;
};

__host__ __device__ inline float orml_travel(float ax, float ay, float bx, float by, float speed) {
    float dx = ax - bx;
    float dy = ay - by;
    float sq = dx * dx;
    sq = sq + dy * dy;
    return sqrtf(sq) / speed;
}

__host__ __device__ inline OrmlBest orml_best_insertion(const OrmlRoutes& R, const OrmlOrders& O,
                                                        int r, int o, float late_weight) {
    const int L = R.n_slots;
    const float* node = R.node_xy + (long long)r * (L + 2) * 2;
    const long long c0 = (long long)r * (L + 1);
    const float* depart_prev = R.depart_prev + c0;
    const float* leg = R.leg + c0;
    const float* arrival = R.arrival + c0;
    const float* cum_wait = R.cum_wait + c0;
    const float* soft = R.soft + c0;
    const float* hard = R.hard + c0;
    const float* soft_min = R.soft_min + c0;
    const float* hard_min = R.hard_min + c0;
    const float* load_before = R.load_before + c0;
    const float speed = R.speed[r];
    const float cap = R.capacity[r];
    const int n = R.n_stops[r];
    const int limit = R.insert_limit[r];

    const float px = O.pickup_xy[2 * o], py = O.pickup_xy[2 * o + 1];
    const float dx = O.dropoff_xy[2 * o], dy = O.dropoff_xy[2 * o + 1];
    const bool hp = O.has_pickup[o] != 0;
    const float ready = O.ready[o], p_latest = O.pickup_latest[o];
    const float due = O.due[o], d_latest = O.dropoff_latest[o], d_ready = O.dropoff_ready[o];
    const float p_svc = O.pickup_service[o], d_svc = O.dropoff_service[o];
    const float size = O.size[o];
    // Without a pickup, the order rides from the start: P is virtual and free.
    const float t_pd = hp ? orml_travel(px, py, dx, dy, speed)
                          : orml_travel(node[0], node[1], dx, dy, speed);

    OrmlBest best;
    best.cost = ORML_INF;
    best.travel = 0.0f;
    best.lateness = 0.0f;
    best.arrival = 0.0f;
    best.i = -1;
    best.j = -1;

    for (int i = 0; i <= limit; ++i) {
        if (!hp && i > 0) break;  // a virtual pickup only sits at the start
        const bool nxt_i = i < n;
        float t_in = orml_travel(node[2 * i], node[2 * i + 1], px, py, speed);
        const float t_out = orml_travel(node[2 * (i + 1)], node[2 * (i + 1) + 1], px, py, speed);
        const float arr_p = hp ? depart_prev[i] + t_in : depart_prev[0];
        const float dep_p = hp ? fmaxf(arr_p, ready) + p_svc : arr_p;
        const float delta1 = (nxt_i && hp) ? fmaxf((dep_p + t_out) - arrival[i], 0.0f) : 0.0f;
        const float x1 = delta1 + cum_wait[i];
        float travel_p = nxt_i ? (t_in + t_out) - leg[i] : t_in;
        travel_p = hp ? travel_p : 0.0f;
        t_in = hp ? t_in : 0.0f;
        bool ok_mid = (!hp || arr_p <= p_latest) && (!hp || load_before[i] + size <= cap);
        float run_soft = 0.0f;
        for (int j = i; j <= limit; ++j) {
            const bool nxt = j < n;
            const float t_dj = orml_travel(node[2 * j], node[2 * j + 1], dx, dy, speed);
            const float t_dn = orml_travel(node[2 * (j + 1)], node[2 * (j + 1) + 1], dx, dy, speed);
            const float close = nxt ? t_dn - leg[j] : 0.0f;
            const float thr = nxt ? (arrival[j] - d_svc) - t_dn : ORML_INF;
            float arr_d, travel;
            if (j == i) {
                arr_d = dep_p + t_pd;
                travel = (t_in + t_pd) + close;
            } else {
                const int m = j - 1;  // stop j-1 now lies between P and D
                run_soft = run_soft + fmaxf(x1 - soft[m], 0.0f);
                ok_mid = ok_mid && (x1 <= hard[m]) && (!hp || load_before[j] + size <= cap);
                const float shift = fmaxf(x1 - cum_wait[j], 0.0f);
                arr_d = (depart_prev[j] + shift) + t_dj;
                travel = (travel_p + t_dj) + close;
            }
            const float start_d = fmaxf(arr_d, d_ready);
            const float x2 = fmaxf(start_d - thr, 0.0f) + cum_wait[j];
            const bool ok = ok_mid && (arr_d <= d_latest) && (x2 <= hard_min[j]);
            if (!ok) continue;
            float late = run_soft + fmaxf(arr_d - due, 0.0f);
            float weighted = late_weight * late;
            float cost = travel + weighted;
            if (x2 > soft_min[j] && cost < best.cost) {
                float suffix = 0.0f;
                for (int q = j; q < L; ++q) suffix = suffix + fmaxf(x2 - soft[q], 0.0f);
                late = late + suffix;
                weighted = late_weight * late;
                cost = travel + weighted;
            }
            if (cost < best.cost) {
                best.cost = cost;
                best.lateness = late;
                best.arrival = arr_d;
                best.i = i;
                best.j = j;
            }
        }
    }
    if (best.i >= 0) {
        const float weighted = late_weight * best.lateness;
        best.travel = best.cost - weighted;
    }
    return best;
}

extern "C" __global__ void orml_insertion_costs(
    const float* node_xy, const float* depart_prev, const float* leg, const float* arrival,
    const float* cum_wait, const float* soft, const float* hard, const float* soft_min,
    const float* hard_min, const float* load_before, const float* speed, const float* capacity,
    const int* n_stops, const int* insert_limit, int n_routes, int n_slots,
    const float* pickup_xy, const float* dropoff_xy, const float* ready,
    const float* pickup_latest, const float* due, const float* dropoff_latest,
    const float* dropoff_ready, const float* pickup_service, const float* dropoff_service, const float* size,
    const unsigned char* has_pickup, int n_orders, int pairs, float late_weight,
    float* out_cost, float* out_travel, float* out_lateness, float* out_arrival, int* out_i,
    int* out_j) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long total = pairs ? (long long)n_routes : (long long)n_routes * n_orders;
    if (idx >= total) return;
    const int r = pairs ? (int)idx : (int)(idx / n_orders);
    const int o = pairs ? (int)idx : (int)(idx % n_orders);
    OrmlRoutes R = {node_xy, depart_prev, leg, arrival, cum_wait, soft, hard, soft_min,
                    hard_min, load_before, speed, capacity, n_stops, insert_limit, n_slots};
    OrmlOrders O = {pickup_xy,      dropoff_xy,     ready,           pickup_latest,
                    due,            dropoff_latest, dropoff_ready,   pickup_service,
                    dropoff_service, size,          has_pickup};
    const OrmlBest b = orml_best_insertion(R, O, r, o, late_weight);
    out_cost[idx] = b.cost;
    out_travel[idx] = b.travel;
    out_lateness[idx] = b.lateness;
    out_arrival[idx] = b.arrival;
    out_i[idx] = b.i;
    out_j[idx] = b.j;
}

// ---- Per-route walks: one thread per route --------------------------------------------------
// The array code walks the L stop slots in Python, a dozen small kernels per slot: on a GPU the
// launches, not the arithmetic, set the time (5.3 ms per pricing of any size on an H200). These
// two walk each route's own stops in one thread, in the float32 operations and order of their
// CPU twins (kernels/_insertion_costs_jit.py::_context_all, kernels/_schedule_jit.py::_walk).

__host__ __device__ inline float orml_pos(float x) { return x > 0.0f ? x : 0.0f; }

// One route's RouteContext (kernels/insertion_types.py): stop arrays of L slots in, context
// rows of L+1 (node_xy L+2 nodes) out; cum_wait[0] arrives zeroed.
__host__ __device__ inline void orml_context_row(
    float start_x, float start_y, float start_time, float v, float load0, int n, int L,
    const float* stop_xy, const float* stop_ready, const float* stop_due,
    const float* stop_latest, const float* stop_service, const float* stop_load, float* nxy,
    float* depart_prev, float* leg, float* arrival, float* cum_wait, float* soft, float* hard,
    float* soft_min, float* hard_min, float* load_before) {
    nxy[0] = start_x;
    nxy[1] = start_y;
    depart_prev[0] = start_time;
    load_before[0] = load0;
    float t = start_time;
    float hx = start_x, hy = start_y;
    for (int q = 0; q < L; ++q) {
        const float sx = stop_xy[2 * q], sy = stop_xy[2 * q + 1];
        nxy[2 * (q + 1)] = sx;
        nxy[2 * (q + 1) + 1] = sy;
        if (q < n) {
            const float g = orml_travel(sx, sy, hx, hy, v);
            const float a = t + g;
            const float rd = stop_ready[q];
            const float later = a > rd ? a : rd;
            const float dep = later + stop_service[q];
            arrival[q] = a;
            depart_prev[q + 1] = dep;
            leg[q] = g;
            cum_wait[q + 1] = cum_wait[q] + (later - a);
            soft[q] = cum_wait[q] + orml_pos(stop_due[q] - a);
            hard[q] = cum_wait[q] + orml_pos(stop_latest[q] - a);
            load_before[q + 1] = load_before[q] + stop_load[q];
            t = dep;
            hx = sx;
            hy = sy;
        } else {
            arrival[q] = ORML_INF;
            cum_wait[q + 1] = cum_wait[q];
            soft[q] = ORML_INF;
            hard[q] = ORML_INF;
            load_before[q + 1] = load_before[q];
        }
    }
    arrival[L] = ORML_INF;
    soft[L] = ORML_INF;
    hard[L] = ORML_INF;
    soft_min[L] = ORML_INF;
    hard_min[L] = ORML_INF;
    for (int q = L - 1; q >= 0; --q) {
        // Python's min(a, b): b only when b < a.
        soft_min[q] = soft_min[q + 1] < soft[q] ? soft_min[q + 1] : soft[q];
        hard_min[q] = hard_min[q + 1] < hard[q] ? hard_min[q + 1] : hard[q];
    }
}

// RouteContext (kernels/insertion_types.py); every output arrives zeroed.
extern "C" __global__ void orml_route_context(
    const float* start_xy, const float* start_time, const float* speed, const float* load0,
    const int* n_stops, const float* stop_xy, const float* stop_ready, const float* stop_due,
    const float* stop_latest, const float* stop_service, const float* stop_load, int n_routes,
    int n_slots, float* node_xy, float* depart_prev, float* leg, float* arrival,
    float* cum_wait, float* soft, float* hard, float* soft_min, float* hard_min,
    float* load_before) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_routes) return;
    const int L = n_slots;
    const long long w = (long long)r * (L + 1);  // row r of the [R, L+1] arrays
    const long long s = (long long)r * L;        // row r of the [R, L] stop arrays
    orml_context_row(start_xy[2 * r], start_xy[2 * r + 1], start_time[r], speed[r], load0[r],
                     n_stops[r], L, stop_xy + 2 * s, stop_ready + s, stop_due + s,
                     stop_latest + s, stop_service + s, stop_load + s,
                     node_xy + (long long)r * (L + 2) * 2, depart_prev + w, leg + w,
                     arrival + w, cum_wait + w, soft + w, hard + w, soft_min + w, hard_min + w,
                     load_before + w);
}

// schedule's loop (kernels/schedule.py::_walk): arrival and departure float[R, L] arrive NaN;
// travel and t_end float[R].
extern "C" __global__ void orml_schedule_walk(
    const float* start_xy, const float* start_time, const float* speed, const int* n_stops,
    const float* stop_xy, const float* stop_ready, const float* stop_service, int n_routes,
    int n_slots, float* arrival, float* departure, float* travel, float* t_end) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_routes) return;
    const long long s = (long long)r * n_slots;
    float t = start_time[r];
    float hx = start_xy[2 * r], hy = start_xy[2 * r + 1];
    float driven = 0.0f;
    for (int q = 0; q < n_stops[r]; ++q) {
        const float sx = stop_xy[2 * (s + q)], sy = stop_xy[2 * (s + q) + 1];
        const float leg = orml_travel(sx, sy, hx, hy, speed[r]);
        const float arr = t + leg;
        const float ready = stop_ready[s + q];
        const float later = (arr >= ready || arr != arr) ? arr : ready;  // np.maximum
        const float dep = later + stop_service[s + q];
        arrival[s + q] = arr;
        departure[s + q] = dep;
        driven = driven + leg;
        t = dep;
        hx = sx;
        hy = sy;
    }
    travel[r] = driven;
    t_end[r] = t;
}
