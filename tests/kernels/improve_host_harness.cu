// Runs kernels/improve.cu's orml_improve_route on the CPU, route by route, so the CUDA source is
// checked against its Numba twin on machines without a GPU.
// Usage: harness DIR R L K LATE_WEIGHT MAX_PASSES TOL ; reads DIR/<name>.bin, writes
// DIR/out_<name>.bin (the edited stop arrays, owner, moves).
#include "harness_io.h"
#include "insertion_costs.cu"
#include "improve.cu"

int main(int argc, char** argv) {
    if (argc != 8) {
        std::fprintf(stderr, "usage: %s DIR R L K LATE_WEIGHT MAX_PASSES TOL\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const size_t nr = std::atoi(argv[2]), L = std::atoi(argv[3]), K = std::atoi(argv[4]);
    const float w = (float)std::atof(argv[5]);
    const int passes = std::atoi(argv[6]);
    const float tol = (float)std::atof(argv[7]);
    auto rows = load<long long>(dir, "rows", K);
    auto start_xy = load<float>(dir, "start_xy", nr * 2);
    auto start_time = load<float>(dir, "start_time", nr);
    auto speed = load<float>(dir, "speed", nr);
    auto capacity = load<float>(dir, "capacity", nr);
    auto load0 = load<float>(dir, "load0", nr);
    auto n_stops = load<int>(dir, "n_stops", nr);
    auto insert_limit = load<int>(dir, "insert_limit", nr);
    auto stop_xy = load<float>(dir, "stop_xy", nr * L * 2);
    auto stop_ready = load<float>(dir, "stop_ready", nr * L);
    auto stop_due = load<float>(dir, "stop_due", nr * L);
    auto stop_latest = load<float>(dir, "stop_latest", nr * L);
    auto stop_service = load<float>(dir, "stop_service", nr * L);
    auto stop_load = load<float>(dir, "stop_load", nr * L);
    auto owner = load<int>(dir, "owner", nr * L);
    std::vector<float> red[6], next[6], ctx[9];
    std::vector<int> red_owner(K * L), new_owner(K * L);
    for (int a = 0; a < 6; ++a) {
        red[a].assign(K * L * (a == 0 ? 2 : 1), 0.0f);
        next[a].assign(K * L * (a == 0 ? 2 : 1), 0.0f);
    }
    std::vector<float> node_xy(K * (L + 2) * 2);
    for (int a = 0; a < 9; ++a) ctx[a].assign(K * (L + 1), 0.0f);
    std::vector<int> moves(K);
    for (size_t k = 0; k < K; ++k) {
        OrmlRouteRow R;
        OrmlScratch sc;
        orml_improve_views(
            (long long)k, rows[k], (int)L, start_xy.data(), start_time.data(), speed.data(),
            capacity.data(), load0.data(), n_stops.data(), insert_limit.data(), stop_xy.data(),
            stop_ready.data(), stop_due.data(), stop_latest.data(), stop_service.data(),
            stop_load.data(), owner.data(), red[0].data(), red[1].data(), red[2].data(),
            red[3].data(), red[4].data(), red[5].data(), red_owner.data(), node_xy.data(),
            ctx[0].data(), ctx[1].data(), ctx[2].data(), ctx[3].data(), ctx[4].data(),
            ctx[5].data(), ctx[6].data(), ctx[7].data(), ctx[8].data(), next[0].data(),
            next[1].data(), next[2].data(), next[3].data(), next[4].data(), next[5].data(),
            new_owner.data(), &R, &sc);
        moves[k] = orml_improve_route(R, (int)L, w, passes, tol, sc);
    }
    save(dir, "stop_xy", stop_xy);
    save(dir, "stop_ready", stop_ready);
    save(dir, "stop_due", stop_due);
    save(dir, "stop_latest", stop_latest);
    save(dir, "stop_service", stop_service);
    save(dir, "stop_load", stop_load);
    save(dir, "owner", owner);
    save(dir, "moves", moves);
    return 0;
}
