// improve: the CUDA twin of kernels/_improve_jit.py. One thread runs one route's whole
// relocation search, every pass (kernels/improve.py says what a move is and why it never makes
// a route worse). Compiled after insertion_costs.cu, whose device functions it calls: the
// launcher (kernels/_improve_cuda.py) concatenates the two sources, and
// tests/kernels/improve_host_harness.cu includes both to run this very source on a CPU. The
// float32 operations and their order are the Numba twin's; compile with --fmad=false.
//
// Layouts (row-major; L = n_slots, K = number of routes improved, k = this thread's entry):
//   routes         as in insertion_costs.cu; the stop arrays and owner int[R, L] are edited in
//                  place (the launcher passes copies)
//   rows           long long[K]  the routes to improve, distinct
//   red_*          the route without the moving order: stop arrays [K, L] (xy [K, L, 2]),
//                  owner int[K, L]
//   ctx_*          its RouteContext rows: node_xy [K, L+2, 2], the rest [K, L+1]
//   new_*          the route with the order at its new place: as red_*
//   moves          int[K]  relocations applied

__host__ __device__ inline bool orml_finite(float x) { return x - x == 0.0f; }

// travel + late_weight * lateness of a route's first n stops (schedule's walk, lateness summed
// in slot order).
__host__ __device__ inline float orml_route_cost(float sx0, float sy0, float t0, float speed,
                                                 int n, const float* xy, const float* ready,
                                                 const float* due, const float* service,
                                                 float late_weight) {
    float t = t0;
    float hx = sx0, hy = sy0;
    float driven = 0.0f;
    float late = 0.0f;
    for (int q = 0; q < n; ++q) {
        const float sx = xy[2 * q], sy = xy[2 * q + 1];
        const float leg = orml_travel(sx, sy, hx, hy, speed);
        const float arr = t + leg;
        const float rd = ready[q];
        const float later = (arr >= rd || arr != arr) ? arr : rd;
        t = later + service[q];
        driven = driven + leg;
        late = late + orml_pos(arr - due[q]);
        hx = sx;
        hy = sy;
    }
    const float weighted = late_weight * late;
    return driven + weighted;
}

struct OrmlStops {  // one route's stop arrays, L slots
    float* xy;
    float* ready;
    float* due;
    float* latest;
    float* service;
    float* load;
    int* owner;
};

struct OrmlMoving {  // the order being relocated, rebuilt from its stops
    float pickup_xy[2];
    float dropoff_xy[2];
    float ready, pickup_latest, due, dropoff_latest, dropoff_ready, pickup_service,
        dropoff_service, size;
    unsigned char has_pickup;
};

struct OrmlRouteRow {  // route r: where it starts, its stops, its limits
    float start_x, start_y, start_time, speed;
    const float* speed_p;
    const float* capacity_p;
    float load0;
    int n;
    int insert_limit;
    OrmlStops stops;
};

struct OrmlScratch {  // this thread's rows of the scratch arrays
    OrmlStops red;
    OrmlStops next;
    float* node_xy;
    float* depart_prev;
    float* leg;
    float* arrival;
    float* cum_wait;
    float* soft;
    float* hard;
    float* soft_min;
    float* hard_min;
    float* load_before;
};

__host__ __device__ inline void orml_copy_stop(const OrmlStops& from, int a, const OrmlStops& to,
                                               int b) {
    to.xy[2 * b] = from.xy[2 * a];
    to.xy[2 * b + 1] = from.xy[2 * a + 1];
    to.ready[b] = from.ready[a];
    to.due[b] = from.due[a];
    to.latest[b] = from.latest[a];
    to.service[b] = from.service[a];
    to.load[b] = from.load[a];
    to.owner[b] = from.owner[a];
}

// The route's first n stops without those of key, padding after; returns the stops left.
__host__ __device__ inline int orml_remove(const OrmlStops& s, int n, int L, int key,
                                           const OrmlStops& out) {
    int m = 0;
    for (int q = 0; q < n; ++q) {
        if (s.owner[q] == key) continue;
        orml_copy_stop(s, q, out, m);
        ++m;
    }
    for (int q = m; q < L; ++q) {
        out.xy[2 * q] = 0.0f;
        out.xy[2 * q + 1] = 0.0f;
        out.ready[q] = -ORML_INF;
        out.due[q] = ORML_INF;
        out.latest[q] = ORML_INF;
        out.service[q] = 0.0f;
        out.load[q] = 0.0f;
        out.owner[q] = -1;
    }
    return m;
}

// The gain of taking order key (drop-off at slot s) off the route and back at its cheapest
// place; -inf where none is feasible. Leaves the route without it in sc.red (m stops in *m),
// the order in mv and the place in *best.
__host__ __device__ inline float orml_relocation(const OrmlRouteRow& R, int s, int key,
                                                 float now, float late_weight, int L,
                                                 const OrmlScratch& sc, OrmlMoving& mv, int* m,
                                                 OrmlBest* best) {
    const OrmlStops& st = R.stops;
    int p = -1;
    for (int q = 0; q < R.n; ++q) {
        if (st.owner[q] == key && st.load[q] > 0.0f) {
            p = q;
            break;
        }
    }
    const bool hp = p >= 0;
    mv.has_pickup = hp ? 1 : 0;
    mv.pickup_xy[0] = hp ? st.xy[2 * p] : 0.0f;
    mv.pickup_xy[1] = hp ? st.xy[2 * p + 1] : 0.0f;
    mv.ready = hp ? st.ready[p] : -ORML_INF;
    mv.pickup_latest = hp ? st.latest[p] : ORML_INF;
    mv.pickup_service = hp ? st.service[p] : 0.0f;
    mv.dropoff_xy[0] = st.xy[2 * s];
    mv.dropoff_xy[1] = st.xy[2 * s + 1];
    mv.due = st.due[s];
    mv.dropoff_latest = st.latest[s];
    mv.dropoff_ready = st.ready[s];
    mv.dropoff_service = st.service[s];
    mv.size = -st.load[s];
    *m = orml_remove(st, R.n, L, key, sc.red);
    const int limit = R.insert_limit - (R.n - *m);
    const float reduced = orml_route_cost(R.start_x, R.start_y, R.start_time, R.speed, *m,
                                          sc.red.xy, sc.red.ready, sc.red.due, sc.red.service,
                                          late_weight);
    sc.cum_wait[0] = 0.0f;
    orml_context_row(R.start_x, R.start_y, R.start_time, R.speed, R.load0, *m, L, sc.red.xy,
                     sc.red.ready, sc.red.due, sc.red.latest, sc.red.service, sc.red.load,
                     sc.node_xy, sc.depart_prev, sc.leg, sc.arrival, sc.cum_wait, sc.soft,
                     sc.hard, sc.soft_min, sc.hard_min, sc.load_before);
    OrmlRoutes one = {sc.node_xy, sc.depart_prev, sc.leg, sc.arrival, sc.cum_wait,
                      sc.soft, sc.hard, sc.soft_min, sc.hard_min, sc.load_before,
                      R.speed_p, R.capacity_p, m, &limit, L};
    OrmlOrders order = {mv.pickup_xy, mv.dropoff_xy, &mv.ready, &mv.pickup_latest,
                        &mv.due, &mv.dropoff_latest, &mv.dropoff_ready, &mv.pickup_service,
                        &mv.dropoff_service, &mv.size, &mv.has_pickup};
    *best = orml_best_insertion(one, order, 0, 0, late_weight);
    const float gain = now - (reduced + best->cost);
    return orml_finite(gain) ? gain : -ORML_INF;
}

// The route without the order (sc.red, m stops) with the order at pickup position i and
// drop-off position j, into sc.next (route_edit.insert_orders).
__host__ __device__ inline void orml_insert(const OrmlScratch& sc, int m, int i, int j, int key,
                                            const OrmlMoving& mv) {
    const bool hp = mv.has_pickup != 0;
    const int d_at = hp ? j + 1 : j;
    const int total = hp ? m + 2 : m + 1;
    int src = 0;
    const OrmlStops& out = sc.next;
    for (int q = 0; q < total; ++q) {
        if (hp && q == i) {
            out.xy[2 * q] = mv.pickup_xy[0];
            out.xy[2 * q + 1] = mv.pickup_xy[1];
            out.ready[q] = mv.ready;
            out.due[q] = ORML_INF;
            out.latest[q] = mv.pickup_latest;
            out.service[q] = mv.pickup_service;
            out.load[q] = mv.size;
            out.owner[q] = key;
        } else if (q == d_at) {
            out.xy[2 * q] = mv.dropoff_xy[0];
            out.xy[2 * q + 1] = mv.dropoff_xy[1];
            out.ready[q] = mv.dropoff_ready;
            out.due[q] = mv.due;
            out.latest[q] = mv.dropoff_latest;
            out.service[q] = mv.dropoff_service;
            out.load[q] = -mv.size;
            out.owner[q] = key;
        } else {
            orml_copy_stop(sc.red, src, out, q);
            ++src;
        }
    }
}

// Route R's whole search; returns the relocations applied.
__host__ __device__ inline int orml_improve_route(const OrmlRouteRow& R, int L, float late_weight,
                                                  int max_passes, float tol,
                                                  const OrmlScratch& sc) {
    const float half_tol = tol / 2.0f;
    int moves = 0;
    OrmlMoving mv;
    OrmlBest place;
    int m = 0;
    for (int pass = 0; pass < max_passes; ++pass) {
        const float now = orml_route_cost(R.start_x, R.start_y, R.start_time, R.speed, R.n,
                                          R.stops.xy, R.stops.ready, R.stops.due,
                                          R.stops.service, late_weight);
        float best = -ORML_INF;
        int best_slot = -1, at_i = -1, at_j = -1;
        for (int s = 0; s < R.n; ++s) {
            const int key = R.stops.owner[s];
            if (key < 0 || !(R.stops.load[s] < 0.0f)) continue;
            const float gain = orml_relocation(R, s, key, now, late_weight, L, sc, mv, &m, &place);
            if (gain >= best) {  // ties: the later drop-off, as the array loop's stable sort
                best = gain;
                best_slot = s;
                at_i = place.i;
                at_j = place.j;
            }
        }
        if (best_slot < 0 || !(best > tol)) break;
        const int key = R.stops.owner[best_slot];
        orml_relocation(R, best_slot, key, now, late_weight, L, sc, mv, &m, &place);
        orml_insert(sc, m, at_i, at_j, key, mv);
        const float after = orml_route_cost(R.start_x, R.start_y, R.start_time, R.speed, R.n,
                                            sc.next.xy, sc.next.ready, sc.next.due,
                                            sc.next.service, late_weight);
        if (!(after < now - half_tol)) break;
        for (int q = 0; q < R.n; ++q) orml_copy_stop(sc.next, q, R.stops, q);
        ++moves;
    }
    return moves;
}

// Thread k's views of the arrays (shared by the kernel and the host harness).
__host__ __device__ inline void orml_improve_views(
    long long k, long long r, int L, const float* start_xy, const float* start_time,
    const float* speed, const float* capacity, const float* load0, const int* n_stops,
    const int* insert_limit, float* stop_xy, float* stop_ready, float* stop_due,
    float* stop_latest, float* stop_service, float* stop_load, int* owner, float* red_xy,
    float* red_ready, float* red_due, float* red_latest, float* red_service, float* red_load,
    int* red_owner, float* ctx_node_xy, float* ctx_depart_prev, float* ctx_leg,
    float* ctx_arrival, float* ctx_cum_wait, float* ctx_soft, float* ctx_hard,
    float* ctx_soft_min, float* ctx_hard_min, float* ctx_load_before, float* new_xy,
    float* new_ready, float* new_due, float* new_latest, float* new_service, float* new_load,
    int* new_owner, OrmlRouteRow* R, OrmlScratch* sc) {
    const long long s = r * L, t = k * L, w = k * (L + 1);
    R->start_x = start_xy[2 * r];
    R->start_y = start_xy[2 * r + 1];
    R->start_time = start_time[r];
    R->speed = speed[r];
    R->speed_p = speed + r;
    R->capacity_p = capacity + r;
    R->load0 = load0[r];
    R->n = n_stops[r];
    R->insert_limit = insert_limit[r];
    R->stops = {stop_xy + 2 * s, stop_ready + s, stop_due + s, stop_latest + s,
                stop_service + s, stop_load + s, owner + s};
    sc->red = {red_xy + 2 * t, red_ready + t, red_due + t, red_latest + t,
               red_service + t, red_load + t, red_owner + t};
    sc->next = {new_xy + 2 * t, new_ready + t, new_due + t, new_latest + t,
                new_service + t, new_load + t, new_owner + t};
    sc->node_xy = ctx_node_xy + k * (L + 2) * 2;
    sc->depart_prev = ctx_depart_prev + w;
    sc->leg = ctx_leg + w;
    sc->arrival = ctx_arrival + w;
    sc->cum_wait = ctx_cum_wait + w;
    sc->soft = ctx_soft + w;
    sc->hard = ctx_hard + w;
    sc->soft_min = ctx_soft_min + w;
    sc->hard_min = ctx_hard_min + w;
    sc->load_before = ctx_load_before + w;
}

extern "C" __global__ void orml_improve(
    const long long* rows, int n_rows, int n_slots, const float* start_xy,
    const float* start_time, const float* speed, const float* capacity, const float* load0,
    const int* n_stops, const int* insert_limit, float* stop_xy, float* stop_ready,
    float* stop_due, float* stop_latest, float* stop_service, float* stop_load, int* owner,
    float late_weight, int max_passes, float tol, float* red_xy, float* red_ready,
    float* red_due, float* red_latest, float* red_service, float* red_load, int* red_owner,
    float* ctx_node_xy, float* ctx_depart_prev, float* ctx_leg, float* ctx_arrival,
    float* ctx_cum_wait, float* ctx_soft, float* ctx_hard, float* ctx_soft_min,
    float* ctx_hard_min, float* ctx_load_before, float* new_xy, float* new_ready,
    float* new_due, float* new_latest, float* new_service, float* new_load, int* new_owner,
    int* moves) {
    const long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_rows) return;
    OrmlRouteRow R;
    OrmlScratch sc;
    orml_improve_views(k, rows[k], n_slots, start_xy, start_time, speed, capacity, load0,
                       n_stops, insert_limit, stop_xy, stop_ready, stop_due, stop_latest,
                       stop_service, stop_load, owner, red_xy, red_ready, red_due, red_latest,
                       red_service, red_load, red_owner, ctx_node_xy, ctx_depart_prev, ctx_leg,
                       ctx_arrival, ctx_cum_wait, ctx_soft, ctx_hard, ctx_soft_min,
                       ctx_hard_min, ctx_load_before, new_xy, new_ready, new_due, new_latest,
                       new_service, new_load, new_owner, &R, &sc);
    moves[k] = orml_improve_route(R, n_slots, late_weight, max_passes, tol, sc);
}
