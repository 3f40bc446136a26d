# devenv.sh environment for maintainers: the QAIRT SDK (model tools, and the headers for the
# QNN ABI layout check), Rust, Elixir, Python 3.10 for the SDK's converters, libclang for
# bindgen. Neither building nor using hexagon_tpu needs any of this; see docs/models.md.
#
#   devenv shell
#   cd native/hexagon_tpu_nif/qnn/sdk_layout && cargo run
#
# The QAIRT SDK is Qualcomm's proprietary software, fetched from Qualcomm at its own terms;
# this repository neither vendors nor redistributes it.
{ pkgs, lib, ... }:

let
  qairtVersion = "2.42.0.251225";

  qairt = pkgs.stdenvNoCC.mkDerivation {
    pname = "qairt-sdk";
    version = qairtVersion;

    src = pkgs.fetchurl {
      name = "qairt-${qairtVersion}.zip";
      url = "https://softwarecenter.qualcomm.com/api/download/software/sdks/Qualcomm_AI_Runtime_Community/All/${qairtVersion}/v${qairtVersion}.zip";
      # Filled in by the maintainer on first use: the first `devenv shell` fails with
      # "hash mismatch ... got: sha256-..."; paste that value here.
      hash = lib.fakeHash;
    };

    nativeBuildInputs = [ pkgs.unzip ];
    unpackPhase = "unzip -q $src";
    dontConfigure = true;
    dontBuild = true;
    # Qualcomm's prebuilt binaries (host, Android, Hexagon) are kept exactly as shipped.
    dontFixup = true;
    installPhase = ''
      runHook preInstall
      mkdir -p $out
      cp -r qairt/${qairtVersion}/. $out/
      runHook postInstall
    '';
  };
in
{
  packages = [
    pkgs.unzip
    pkgs.llvmPackages.libclang
  ];

  # The NIF needs Rust >= 1.91 (rustler 0.39).
  languages.rust = {
    enable = true;
    components = [ "rustc" "cargo" "clippy" "rustfmt" "rust-analyzer" ];
  };

  languages.elixir.enable = true;

  # The SDK's converters (qairt-converter, qnn-onnx-converter, ...) are Python programs that
  # want Python 3.10; `python3 $QNN_SDK_ROOT/bin/check-python-dependency` installs their
  # packages into this venv.
  languages.python = {
    enable = true;
    package = pkgs.python310;
    venv.enable = true;
  };

  env = {
    QNN_SDK_ROOT = "${qairt}";
    # bindgen, for the layout check against the SDK's headers.
    LIBCLANG_PATH = "${pkgs.llvmPackages.libclang.lib}/lib";
  };

  # The host tools are prebuilt for a regular Linux (FHS) system; on NixOS they need nix-ld.
  enterShell = ''
    export PATH="$QNN_SDK_ROOT/bin/x86_64-linux-clang:$PATH"
    export LD_LIBRARY_PATH="$QNN_SDK_ROOT/lib/x86_64-linux-clang''${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export PYTHONPATH="$QNN_SDK_ROOT/lib/python''${PYTHONPATH:+:$PYTHONPATH}"
    echo "QAIRT ${qairtVersion}: QNN_SDK_ROOT=$QNN_SDK_ROOT"
  '';
}
