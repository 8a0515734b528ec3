// Runs kernels/insertion_costs.cu's orml_best_insertion on the CPU, pair by pair, so the CUDA
// source is checked against the NumPy loop on machines without a GPU.
// Usage: harness DIR R L O PAIRS LATE_WEIGHT ; reads DIR/<name>.bin, writes DIR/out_<name>.bin.
#include "harness_io.h"
#include "insertion_costs.cu"

int main(int argc, char** argv) {
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s DIR R L O PAIRS LATE_WEIGHT\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const int nr = std::atoi(argv[2]), L = std::atoi(argv[3]), no = std::atoi(argv[4]);
    const bool pairs = std::atoi(argv[5]) != 0;
    const float w = (float)std::atof(argv[6]);
    const size_t c = (size_t)nr * (L + 1);
    auto node_xy = load<float>(dir, "node_xy", (size_t)nr * (L + 2) * 2);
    auto depart_prev = load<float>(dir, "depart_prev", c);
    auto leg = load<float>(dir, "leg", c);
    auto arrival = load<float>(dir, "arrival", c);
    auto cum_wait = load<float>(dir, "cum_wait", c);
    auto soft = load<float>(dir, "soft", c);
    auto hard = load<float>(dir, "hard", c);
    auto soft_min = load<float>(dir, "soft_min", c);
    auto hard_min = load<float>(dir, "hard_min", c);
    auto load_before = load<float>(dir, "load_before", c);
    auto speed = load<float>(dir, "speed", nr);
    auto capacity = load<float>(dir, "capacity", nr);
    auto n_stops = load<int>(dir, "n_stops", nr);
    auto insert_limit = load<int>(dir, "insert_limit", nr);
    auto pickup_xy = load<float>(dir, "pickup_xy", (size_t)no * 2);
    auto dropoff_xy = load<float>(dir, "dropoff_xy", (size_t)no * 2);
    auto ready = load<float>(dir, "ready", no);
    auto pickup_latest = load<float>(dir, "pickup_latest", no);
    auto due = load<float>(dir, "due", no);
    auto dropoff_latest = load<float>(dir, "dropoff_latest", no);
    auto dropoff_ready = load<float>(dir, "dropoff_ready", no);
    auto pickup_service = load<float>(dir, "pickup_service", no);
    auto dropoff_service = load<float>(dir, "dropoff_service", no);
    auto size = load<float>(dir, "size", no);
    auto has_pickup = load<unsigned char>(dir, "has_pickup", no);

    OrmlRoutes R = {node_xy.data(),  depart_prev.data(), leg.data(),      arrival.data(),
                    cum_wait.data(), soft.data(),        hard.data(),     soft_min.data(),
                    hard_min.data(), load_before.data(), speed.data(),    capacity.data(),
                    n_stops.data(),  insert_limit.data(), L};
    OrmlOrders O = {pickup_xy.data(),       dropoff_xy.data(),     ready.data(),
                    pickup_latest.data(),   due.data(),            dropoff_latest.data(),
                    dropoff_ready.data(),   pickup_service.data(), dropoff_service.data(),
                    size.data(),            has_pickup.data()};
    const size_t total = pairs ? (size_t)nr : (size_t)nr * no;
    std::vector<float> cost(total), travel(total), late(total), drop_arrival(total);
    std::vector<int> bi(total), bj(total);
    for (size_t idx = 0; idx < total; ++idx) {
        const int r = pairs ? (int)idx : (int)(idx / no);
        const int o = pairs ? (int)idx : (int)(idx % no);
        const OrmlBest b = orml_best_insertion(R, O, r, o, w);
        cost[idx] = b.cost;
        travel[idx] = b.travel;
        late[idx] = b.lateness;
        drop_arrival[idx] = b.arrival;
        bi[idx] = b.i;
        bj[idx] = b.j;
    }
    save(dir, "cost", cost);
    save(dir, "travel", travel);
    save(dir, "lateness", late);
    save(dir, "dropoff_arrival", drop_arrival);
    save(dir, "pickup_pos", bi);
    save(dir, "dropoff_pos", bj);
    return 0;
}
