# Sourced by package.sh, bench-common.sh and bench-firmware.sh (not run on its own): the `swift build`
# flags of release binaries as they ship, so that the package, the tarball and the benchmarks measure
# the same binaries (the Benchmarks article, Sources/McuManager/McuManager.docc/Benchmarks.md).
#   --static-swift-stdlib          the Swift runtime and FoundationEssentials linked in: no toolchain
#                                  needed on the machine, no ~20 shared libraries loaded at start
#   --experimental-lto-mode=full   whole-program optimisation of our modules and their dependencies
#                                  (SwiftNIO, swift-argument-parser, swift-log): 1.7 MB less
#   -Osize                         optimised for size
#   -use-ld=lld, --icf=all         LLVM's linker (LTO needs it), identical functions folded into one
#                                  (1 MB; Swift code never compares function addresses, and Swift
#                                  already merges identical functions within a module)
# The binaries need glibc 2.35 or later (Debian 12, Ubuntu 22.04).
# shellcheck disable=SC2034  # used by the scripts that source this file
release_flags=(
    -c release --static-swift-stdlib --experimental-lto-mode=full
    -Xswiftc -Osize -Xswiftc -use-ld=lld -Xlinker --icf=all
)
