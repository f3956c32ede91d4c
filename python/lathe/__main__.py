"""`python -m lathe --cmake-dir`: where the wheel's C++ SDK is, for building C++ programs against
the same library the Python package runs (as `python -m mlx --cmake-dir` and
`torch.utils.cmake_prefix_path`).

    cmake -S app -B build -DLathe_DIR="$(python -m lathe --cmake-dir)"
    cmake -S app -B build -DCMAKE_PREFIX_PATH="$(python -m lathe --prefix)"

The SDK (headers under include/, the static archives and the CMake package under lib/) is
installed into the package by `pip install .`; a developer build (PYTHONPATH=<build>/python) has
none: there, `cmake --install <build> --prefix P` makes one.
"""
import argparse
import os
import sys


def sdk_prefix():
    """The prefix of the C++ SDK inside this package, or None when it has none."""
    here = os.path.dirname(os.path.abspath(__file__))
    config = os.path.join(here, "lib", "cmake", "Lathe", "LatheConfig.cmake")
    return here if os.path.isfile(config) else None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lathe", description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--cmake-dir", action="store_true",
                       help="the directory of LatheConfig.cmake (for -DLathe_DIR=...)")
    group.add_argument("--prefix", action="store_true",
                       help="the SDK's prefix (for CMAKE_PREFIX_PATH; include/ and lib/ under it)")
    group.add_argument("--include-dir", action="store_true", help="the C++ headers' directory")
    group.add_argument("--version", action="store_true", help="Lathe's version")
    args = parser.parse_args(argv)
    if args.version:
        import lathe  # the extension: the library's own version
        print(lathe.__version__)
        return 0
    prefix = sdk_prefix()
    if prefix is None:
        print("python -m lathe: this lathe package has no C++ SDK (it is a developer build, "
              f"{os.path.dirname(os.path.abspath(__file__))}); install the wheel "
              "(pip install .) or run `cmake --install <build> --prefix <dir>`", file=sys.stderr)
        return 1
    if args.cmake_dir:
        print(os.path.join(prefix, "lib", "cmake", "Lathe"))
    elif args.prefix:
        print(prefix)
    else:
        print(os.path.join(prefix, "include"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
