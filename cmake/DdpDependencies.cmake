# Every dependency comes from Debian's packages (scripts/setup.sh installs them); nothing is vendored.
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED CONFIG)   # libboost1.81-dev: Asio 1.26, header-only
find_package(CLI11 REQUIRED CONFIG)
find_package(spdlog REQUIRED CONFIG)
find_package(fmt REQUIRED CONFIG)
find_package(nlohmann_json 3.11 REQUIRED CONFIG)
find_package(ZLIB REQUIRED)
find_package(Gloo CONFIG REQUIRED)         # un-namespaced imported target `gloo`
find_package(BLAS REQUIRED)                # OpenBLAS through Debian's alternatives
# libmunge-dev: munge credentials for the agents of a SLURM job (rendezvous/auth); munge.pc
find_package(PkgConfig REQUIRED)
pkg_check_modules(MUNGE REQUIRED IMPORTED_TARGET munge)
