// Reading and writing the host harnesses' arrays: DIR/<name>.bin in, DIR/out_<name>.bin out,
// raw little-endian values as NumPy's tofile writes them.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

template <typename T>
static std::vector<T> load(const std::string& dir, const char* name, size_t count) {
    std::vector<T> v(count);
    std::string path = dir + "/" + name + ".bin";
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f || std::fread(v.data(), sizeof(T), count, f) != count) {
        std::fprintf(stderr, "cannot read %zu items from %s\n", count, path.c_str());
        std::exit(2);
    }
    std::fclose(f);
    return v;
}

template <typename T>
static void save(const std::string& dir, const char* name, const std::vector<T>& v) {
    std::string path = dir + "/out_" + name + ".bin";
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(v.data(), sizeof(T), v.size(), f);
    std::fclose(f);
}
