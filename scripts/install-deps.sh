#!/usr/bin/env bash
# Installs what wallsim needs to build, test and benchmark, from Debian packages only.
# Does nothing when everything is present; runs `apt-get update` once before the first install;
# uses sudo when not root. Usage: scripts/install-deps.sh [build|test|tools|fuzz]
set -euo pipefail

want=(
  g++ make cmake ninja-build pkg-config
  libsystemc-dev libboost-dev nlohmann-json3-dev libeigen3-dev
  libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev  # frontends/onnx: ONNX's protobuf classes, linked by wallsim
  protobuf-compiler            # chakra/: protoc generates the Chakra trace schema's classes
)
case "${1:-build}" in
  build) ;;
  # the sweep tests: plots, GNU parallel; the ONNX conformance suite: ONNX's backend test data;
  # the PyTorch capture's tests (tests/frontends/torch): torch, torchvision, numpy
  test) want+=(python3 python3-matplotlib parallel libonnx-testdata
               python3-numpy python3-torch python3-torchvision) ;;
  # jq: compare_outputs.sh; python3-onnx (and the build's protoc): the bad-input corpus's .onnx files
  # python3-torch, python3-torchvision: `wallsim capture` of PyTorch programs
  tools) want+=(python3 python3-matplotlib python3-numpy parallel jq python3-onnx
                python3-torch python3-torchvision) ;;
  fuzz) want+=(clang) ;;  # `make fuzz` only: libFuzzer (libclang_rt.fuzzer comes with clang)
  *) echo "install-deps.sh: unknown profile '$1' (expected build, test, tools or fuzz)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${want[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
echo "install-deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
