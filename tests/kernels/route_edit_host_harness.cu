// Runs kernels/route_edit.cu's orml_insert_row on the CPU, route by route, so the CUDA source is
// checked against the array code (kernels/route_edit.py) on machines without a GPU.
// Usage: harness DIR R L K O ; reads DIR/<name>.bin, writes DIR/out_<name>.bin (the stop
// arrays, owner, n_stops, insert_limit after the edit).
#include "harness_io.h"
#include "route_edit.cu"

int main(int argc, char** argv) {
    if (argc != 6) {
        std::fprintf(stderr, "usage: %s DIR R L K O\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const size_t nr = std::atoi(argv[2]), L = std::atoi(argv[3]), K = std::atoi(argv[4]);
    const size_t O = std::atoi(argv[5]);
    auto rows = load<long long>(dir, "rows", K);
    auto order_of = load<long long>(dir, "order_of", K);
    auto stop_xy = load<float>(dir, "stop_xy", nr * L * 2);
    auto stop_ready = load<float>(dir, "stop_ready", nr * L);
    auto stop_due = load<float>(dir, "stop_due", nr * L);
    auto stop_latest = load<float>(dir, "stop_latest", nr * L);
    auto stop_service = load<float>(dir, "stop_service", nr * L);
    auto stop_load = load<float>(dir, "stop_load", nr * L);
    auto owner = load<int>(dir, "owner", nr * L);
    auto n_stops = load<int>(dir, "n_stops", nr);
    auto insert_limit = load<int>(dir, "insert_limit", nr);
    auto pickup_xy = load<float>(dir, "pickup_xy", O * 2);
    auto dropoff_xy = load<float>(dir, "dropoff_xy", O * 2);
    auto ready = load<float>(dir, "ready", O);
    auto pickup_latest = load<float>(dir, "pickup_latest", O);
    auto due = load<float>(dir, "due", O);
    auto dropoff_latest = load<float>(dir, "dropoff_latest", O);
    auto dropoff_ready = load<float>(dir, "dropoff_ready", O);
    auto pickup_service = load<float>(dir, "pickup_service", O);
    auto dropoff_service = load<float>(dir, "dropoff_service", O);
    auto size = load<float>(dir, "size", O);
    auto has_pickup = load<unsigned char>(dir, "has_pickup", O);
    auto pickup_pos = load<int>(dir, "pickup_pos", K);
    auto dropoff_pos = load<int>(dir, "dropoff_pos", K);
    auto keys = load<int>(dir, "keys", K);
    for (size_t k = 0; k < K; ++k) {
        orml_insert_row((long long)k, rows.data(), order_of.data(), (int)L, stop_xy.data(), stop_ready.data(),
                        stop_due.data(), stop_latest.data(), stop_service.data(),
                        stop_load.data(), owner.data(), n_stops.data(), insert_limit.data(),
                        pickup_xy.data(), dropoff_xy.data(), ready.data(), pickup_latest.data(),
                        due.data(), dropoff_latest.data(), dropoff_ready.data(),
                        pickup_service.data(), dropoff_service.data(), size.data(),
                        has_pickup.data(), pickup_pos.data(), dropoff_pos.data(), keys.data());
    }
    save(dir, "stop_xy", stop_xy);
    save(dir, "stop_ready", stop_ready);
    save(dir, "stop_due", stop_due);
    save(dir, "stop_latest", stop_latest);
    save(dir, "stop_service", stop_service);
    save(dir, "stop_load", stop_load);
    save(dir, "owner", owner);
    save(dir, "n_stops", n_stops);
    save(dir, "insert_limit", insert_limit);
    return 0;
}
