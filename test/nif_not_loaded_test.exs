defmodule HexagonTpu.NifNotLoadedTest do
  # A NIF that cannot load never stops the node (issue 13): HexagonTpu.Native still loads, the
  # application starts, and availability/1 and every call say why. Each test runs a child VM
  # on a copy of this build's ebin whose library is garbage, truncated or missing, through the
  # loader this suite was compiled with (offline: priv/native/libhexagon_tpu_nif.so; a forced
  # build: priv/native/hexagon_tpu_nif.so), its dependencies' ebins (Hex mode) beside it.
  # RustlerPrecompiled's download and forced build: test/hex/nif_not_loaded_hex_test.exs.
  use ExUnit.Case, async: true

  alias HexagonTpu.Test.{NifChild, Support}

  setup do
    dir = Path.join(System.tmp_dir!(), "hexagon_tpu_nif_#{System.unique_integer([:positive])}")
    on_exit(fn -> File.rm_rf!(dir) end)

    # The library the loader opens, relative to the application's directory.
    real = HexagonTpu.Native.nif_path()
    relative = Path.relative_to(real, to_string(:code.lib_dir(:hexagon_tpu)))
    app = Path.join(dir, "lib/hexagon_tpu")
    ebin = Path.join(app, "ebin")
    File.mkdir_p!(ebin)
    File.cp_r!(Path.dirname(:code.which(HexagonTpu)), ebin)
    lib = Path.join(app, relative)
    File.mkdir_p!(Path.dirname(lib))
    %{real: real, lib: lib, ebin: ebin}
  end

  test "a library of garbage bytes", %{lib: lib, ebin: ebin} do
    File.write!(lib, String.duplicate("not a shared object\n", 1000))
    NifChild.assert_not_loaded([ebin | Support.dep_ebins()], lib, "invalid ELF header")
  end

  test "a truncated library is refused before dlopen, which would die of SIGBUS",
       %{real: real, lib: lib, ebin: ebin} do
    {:ok, file} = :file.open(real, [:read, :raw, :binary])
    {:ok, head} = :file.pread(file, 0, 64 * 1024)
    :ok = :file.close(file)
    File.write!(lib, head)

    NifChild.assert_not_loaded(
      [ebin | Support.dep_ebins()],
      lib,
      ~r/truncated.*a segment ends at byte \d+, the file has 65536/
    )
  end

  test "no library", %{lib: lib, ebin: ebin} do
    NifChild.assert_not_loaded(
      [ebin | Support.dep_ebins()],
      lib,
      "cannot open shared object file"
    )
  end
end
