// Scans of a pass's price matrix on the device, for certified_assign's DeviceCosts: each order's
// k cheapest riders (a block per order: k rounds of a block-wide minimum, instead of sorting
// every column), and the pairs below the duals (a thread per pair, counted and compacted in the
// same pass). Only the chosen pairs leave the device. Twins: _pair_scan_jit.py's
// least_per_order (the same pairs in the same order) and certified_assign._under (the same
// test in float64).
//
// bound_t is float32[O, R], an order per row (so a block reads its order's row coalesced);
// +inf marks an infeasible pair or one already priced.

#define PAIR_SCAN_THREADS 256

// (c, r) after (last_c, last_r) in the order (price, rider)?
__device__ inline bool orml_after(float c, int r, float last_c, int last_r) {
    return c > last_c || (c == last_c && r > last_r);
}

__device__ inline bool orml_before(float c, int r, float best_c, int best_r) {
    return c < best_c || (c == best_c && r < best_r);
}

// The certificate's test, in float64 as the host's: a finite bound within the tolerance of
// the threshold u[o] + v[r] counts as below it.
__device__ inline bool orml_under(float b, double thr, double abs_tol, double rel_tol) {
    double x = (double)b;
    return b != __int_as_float(0x7f800000) && x - (abs_tol + rel_tol * fabs(x)) < thr;
}

// For each selected order (orders[s], or s itself when orders is null), its k riders of least
// finite bound, ascending (ties by rider), among the pairs under the duals when u is given.
// Out: rider[s * k + q] (-1 past the order's pairs), price[s * k + q].
extern "C" __global__ void orml_top_candidates(const float* bound_t, int n_orders, int n_riders,
                                               const long long* orders, int n_selected, int k,
                                               const double* u, const double* v, double abs_tol,
                                               double rel_tol, int* rider, float* price) {
    __shared__ float s_c[PAIR_SCAN_THREADS];
    __shared__ int s_r[PAIR_SCAN_THREADS];
    const int s = blockIdx.x;
    if (s >= n_selected) return;
    const int o = orders ? (int)orders[s] : s;
    const float* row = bound_t + (size_t)o * n_riders;
    const float inf = __int_as_float(0x7f800000);
    float last_c = -inf;
    int last_r = -1;
    for (int q = 0; q < k; ++q) {
        float best_c = inf;
        int best_r = -1;
        for (int r = threadIdx.x; r < n_riders; r += blockDim.x) {
            float c = row[r];
            if (c == inf || !orml_after(c, r, last_c, last_r)) continue;
            if (u && !orml_under(c, u[o] + v[r], abs_tol, rel_tol)) continue;
            if (orml_before(c, r, best_c, best_r)) {
                best_c = c;
                best_r = r;
            }
        }
        s_c[threadIdx.x] = best_c;
        s_r[threadIdx.x] = best_r;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (threadIdx.x < half) {
                float c = s_c[threadIdx.x + half];
                int r = s_r[threadIdx.x + half];
                if (r >= 0 && (s_r[threadIdx.x] < 0 ||
                               orml_before(c, r, s_c[threadIdx.x], s_r[threadIdx.x]))) {
                    s_c[threadIdx.x] = c;
                    s_r[threadIdx.x] = r;
                }
            }
            __syncthreads();
        }
        last_c = s_c[0];
        last_r = s_r[0];
        __syncthreads();  // everyone has read s_c[0] before the next round overwrites it
        if (threadIdx.x == 0) {
            rider[(size_t)s * k + q] = last_r;
            price[(size_t)s * k + q] = last_r >= 0 ? last_c : 0.0f;
        }
        if (last_r < 0) {  // no pair left: the rest of the row stays -1
            for (int p = q + 1 + threadIdx.x; p < k; p += blockDim.x) {
                rider[(size_t)s * k + p] = -1;
                price[(size_t)s * k + p] = 0.0f;
            }
            return;
        }
    }
}

// Every pair (r, o) with bound_t[o, r] under u[o] + v[r]: counted in *count, and the first
// ``cap`` written to (rider, order) in no fixed order (the caller sorts them).
extern "C" __global__ void orml_below_duals(const float* bound_t, int n_orders, int n_riders,
                                            const double* u, const double* v, double abs_tol,
                                            double rel_tol, unsigned long long cap,
                                            unsigned long long* count, long long* rider,
                                            long long* order) {
    const size_t n = (size_t)n_orders * n_riders;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const int o = (int)(e / n_riders);
        const int r = (int)(e - (size_t)o * n_riders);
        if (!orml_under(bound_t[e], u[o] + v[r], abs_tol, rel_tol)) continue;
        unsigned long long at = atomicAdd(count, 1ULL);
        if (at < cap) {
            rider[at] = r;
            order[at] = o;
        }
    }
}
