defmodule HexagonTpu.DoctorTest do
  # The doctor (HexagonTpu.diagnose/1, HexagonTpu.Diagnosis, mix hexagon_tpu.doctor) on fake
  # root filesystems built here, one per finding, from made-up ELF bytes (nothing of
  # Qualcomm's), on qnn_sim, and on Qualcomm's x86-64 HTP emulator (:qnn_host).
  use ExUnit.Case, async: true

  alias HexagonTpu.{Diagnosis, Elf, Error}
  alias HexagonTpu.Diagnosis.Check
  alias HexagonTpu.Test.{QnnHost, Support}

  @id "v2.51.0.260929181845"
  @old_id "v2.47.0.260601114230"

  @em_aarch64 183
  @em_hexagon 164
  @em_arm 40

  # A minimal little-endian ELF shared object: a header, a PT_LOAD over the whole file, a
  # PT_DYNAMIC with DT_NEEDED entries and their string table, then `extra` bytes (a build id).
  defp elf(machine, opts \\ []) do
    class = Keyword.get(opts, :class, 64)
    needed = Keyword.get(opts, :needed, ["libc.so.6"])
    extra = Keyword.get(opts, :extra, "")

    {ehsize, phentsize, dynsize} = if class == 64, do: {64, 56, 16}, else: {52, 32, 8}
    strtab = <<0>> <> Enum.map_join(needed, &(&1 <> <<0>>))

    {offsets, _} = Enum.map_reduce(needed, 1, fn name, at -> {at, at + byte_size(name) + 1} end)

    dyn_off = ehsize + 2 * phentsize
    dyn_count = length(needed) + 3
    str_off = dyn_off + dyn_count * dynsize
    total = str_off + byte_size(strtab) + byte_size(extra)

    entries = Enum.map(offsets, &{1, &1}) ++ [{5, str_off}, {10, byte_size(strtab)}, {0, 0}]

    case class do
      64 ->
        header =
          <<0x7F, "ELF", 2, 1, 1, 0, 0::64, 3::little-16, machine::little-16, 1::little-32,
            0::little-64, ehsize::little-64, 0::little-64, 0::little-32, ehsize::little-16,
            phentsize::little-16, 2::little-16, 0::little-16, 0::little-16, 0::little-16>>

        load =
          <<1::little-32, 5::little-32, 0::little-64, 0::little-64, 0::little-64,
            total::little-64, total::little-64, 4096::little-64>>

        dynamic =
          <<2::little-32, 6::little-32, dyn_off::little-64, dyn_off::little-64,
            dyn_off::little-64, dyn_count * dynsize::little-64, dyn_count * dynsize::little-64,
            8::little-64>>

        dyn = for {tag, value} <- entries, into: "", do: <<tag::little-64, value::little-64>>
        header <> load <> dynamic <> dyn <> strtab <> extra

      32 ->
        header =
          <<0x7F, "ELF", 1, 1, 1, 0, 0::64, 3::little-16, machine::little-16, 1::little-32,
            0::little-32, ehsize::little-32, 0::little-32, 0::little-32, ehsize::little-16,
            phentsize::little-16, 2::little-16, 0::little-16, 0::little-16, 0::little-16>>

        load =
          <<1::little-32, 0::little-32, 0::little-32, 0::little-32, total::little-32,
            total::little-32, 5::little-32, 4096::little-32>>

        dynamic =
          <<2::little-32, dyn_off::little-32, dyn_off::little-32, dyn_off::little-32,
            dyn_count * dynsize::little-32, dyn_count * dynsize::little-32, 6::little-32,
            4::little-32>>

        dyn = for {tag, value} <- entries, into: "", do: <<tag::little-32, value::little-32>>
        header <> load <> dynamic <> dyn <> strtab <> extra
    end
  end

  # The files of an all-good board under `root`; `changes` (relative path => bytes, :dir,
  # {:symlink, target} or nil to leave it out) alter it.
  defp fake_root!(changes \\ %{}) do
    root =
      Path.join(System.tmp_dir!(), "hexagon_tpu_doctor_#{System.unique_integer([:positive])}")

    on_exit(fn -> File.rm_rf!(root) end)

    good = %{
      "usr/lib/libQnnHtp.so" => elf(@em_aarch64, extra: "QnnHtp " <> @id),
      "usr/lib/libQnnSystem.so" => elf(@em_aarch64),
      "usr/lib/libQnnHtpV68Stub.so" => elf(@em_aarch64, extra: "stub " <> @id),
      "usr/lib/dsp/libQnnHtpV68Skel.so" =>
        elf(@em_hexagon, class: 32, needed: ["libc++.so.1"], extra: "skel " <> @id),
      "dev/fastrpc-cdsp" => {:symlink, "/dev/null"},
      "proc/1/comm" => "init\n",
      "proc/731/comm" => "cdsprpcd\n",
      "proc/device-tree/reserved-memory/cdsp-rpc-remote-heap" => :dir
    }

    for {path, content} <- Map.merge(good, changes), content != nil do
      full = Path.join(root, path)
      File.mkdir_p!(Path.dirname(full))

      case content do
        :dir -> File.mkdir_p!(full)
        {:symlink, target} -> File.ln_s!(target, full)
        bytes -> File.write!(full, bytes)
      end
    end

    root
  end

  # Every check of a fake board read as aarch64, without the device creation (the bytes are
  # made up: nothing could open them).
  defp diagnose(root, opts \\ []) do
    HexagonTpu.diagnose(
      Keyword.merge(
        [root: root, machine: :aarch64, dsp_library_path: "/usr/lib/dsp", device_creation: false],
        opts
      )
    )
  end

  defp check(checks, name), do: Enum.find(checks, &(&1.name == name)) || flunk("no #{name}")

  @names [
    :backend_library,
    :system_library,
    :stub_library,
    :dsp_library_path,
    :skel_library,
    :one_build,
    :fastrpc_device,
    :cdsprpcd,
    :remote_heap
  ]

  test "the check order is stated once: the docs' list and @names are Diagnosis.checks/0" do
    {:docs_v1, _, _, _, %{"en" => moduledoc}, _, _} = Code.fetch_docs(Diagnosis)

    documented =
      ~r/^ +\d+\. (.+?) - /m
      |> Regex.scan(moduledoc, capture: :all_but_first)
      |> Enum.flat_map(fn [names] -> Regex.scan(~r/`:(\w+)`/, names, capture: :all_but_first) end)
      |> Enum.map(fn [name] -> String.to_atom(name) end)

    assert documented == Diagnosis.checks()
    assert @names ++ [:device_creation] == Diagnosis.checks()
  end

  describe "HexagonTpu.Elf" do
    test "machine, class, variant, needed libraries and build id of made-up ELF files" do
      dir = fake_root!()

      assert {:ok, %{class: 64, machine: :aarch64, variant: :glibc, needed: ["libc.so.6"]}} =
               Elf.read(Path.join(dir, "usr/lib/libQnnHtp.so"))

      assert {:ok, %{class: 32, machine: :hexagon, variant: :unknown, needed: ["libc++.so.1"]}} =
               Elf.read(Path.join(dir, "usr/lib/dsp/libQnnHtpV68Skel.so"))

      assert {:ok, @id} = Elf.build_id(Path.join(dir, "usr/lib/libQnnHtp.so"))
      assert {:ok, nil} = Elf.build_id(Path.join(dir, "usr/lib/libQnnSystem.so"))
      assert {:error, "not an ELF file"} = Elf.read(Path.join(dir, "proc/1/comm"))
      assert {:error, message} = Elf.read(Path.join(dir, "dev/fastrpc-cdsp"))
      assert message =~ "is a device, not a regular file"
    end

    test "a build id across the 4 MiB chunk boundary is read whole; two ids are an error" do
      dir = fake_root!()
      path = Path.join(dir, "big.so")
      # The first chunk ends inside the id, after "v2.51.0.260929", itself id-shaped.
      File.write!(path, :binary.copy(<<0>>, 4 * 1024 * 1024 - 14) <> @id <> <<0>>)
      assert {:ok, @id} = Elf.build_id(path)

      File.write!(path, @id <> " " <> @old_id)
      assert {:error, message} = Elf.build_id(path)
      assert message =~ "several QAIRT build ids: #{@old_id}, #{@id}"
      assert {:error, message} = Elf.build_id(path, max_bytes: 8)
      assert message =~ "more than the 8 read"
    end
  end

  describe "fake roots, one per finding" do
    test "an all-good board: every check ok, the build id shown" do
      checks = diagnose(fake_root!())
      assert Enum.map(checks, & &1.name) == @names
      assert Enum.all?(checks, &(&1.status == :ok)), Diagnosis.format(checks)
      assert check(checks, :backend_library).detail =~ "(aarch64, glibc), QAIRT #{@id}"
      assert check(checks, :one_build).detail == "backend, stub and skel are QAIRT #{@id}"
      assert check(checks, :cdsprpcd).detail == "running (pid 731)"
      assert check(checks, :remote_heap).detail =~ "reserved-memory/cdsp-rpc-remote-heap"
      assert Diagnosis.first_error(checks) == nil
    end

    test "missing backend" do
      checks = diagnose(fake_root!(%{"usr/lib/libQnnHtp.so" => nil}))

      assert %Check{status: :error, detail: detail, remedy: remedy} =
               check(checks, :backend_library)

      assert detail =~ "usr/lib/libQnnHtp.so does not exist"
      assert remedy =~ "mix hexagon_tpu.runtime"

      assert %Error{reason: :diagnosis, message: "backend_library: " <> _} =
               Diagnosis.first_error(checks)
    end

    test "wrong ELF machine: a 32-bit ARM stub, an aarch64 skel" do
      checks =
        diagnose(
          fake_root!(%{
            "usr/lib/libQnnHtpV68Stub.so" => elf(@em_arm, class: 32, extra: @id),
            "usr/lib/dsp/libQnnHtpV68Skel.so" => elf(@em_aarch64, extra: @id)
          })
        )

      assert %Check{status: :error, detail: detail} = check(checks, :stub_library)
      assert detail =~ "is 32-bit ARM, this machine is aarch64"
      assert %Check{status: :error, detail: detail} = check(checks, :skel_library)
      assert detail =~ "is aarch64, not a Hexagon DSP library"
      assert check(checks, :backend_library).status == :ok
    end

    test "the backend built for another machine than the one asked for" do
      checks = diagnose(fake_root!(), machine: :x86_64)
      assert %Check{status: :error, detail: detail} = check(checks, :backend_library)
      assert detail =~ "is aarch64, this machine is x86-64"
    end

    test "Android variant" do
      android = elf(@em_aarch64, needed: ["liblog.so", "libc++_shared.so", "libc.so"], extra: @id)
      checks = diagnose(fake_root!(%{"usr/lib/libQnnHtp.so" => android}))

      assert %Check{status: :error, detail: detail, remedy: remedy} =
               check(checks, :backend_library)

      assert detail =~ "built for Android (bionic), this system runs glibc"
      assert remedy =~ "Linux (glibc) build"
    end

    test "stub and skel from another build than the backend" do
      checks =
        diagnose(
          fake_root!(%{
            "usr/lib/dsp/libQnnHtpV68Skel.so" =>
              elf(@em_hexagon, class: 32, needed: [], extra: @old_id)
          })
        )

      assert %Check{status: :error, detail: detail} = check(checks, :one_build)
      assert detail == "different QNN builds: backend #{@id}, stub #{@id}, skel #{@old_id}"
      assert Enum.count(checks, &(&1.status == :error)) == 1
    end

    test "a `:`-separated DSP path is flagged; a `;`-separated one is searched in order" do
      root = fake_root!(%{"usr/lib/dsp/libQnnHtpV68Skel.so" => nil})
      File.mkdir_p!(Path.join(root, "opt/dsp"))

      File.write!(
        Path.join(root, "opt/dsp/libQnnHtpV68Skel.so"),
        elf(@em_hexagon, class: 32, extra: @id)
      )

      checks = diagnose(root, dsp_library_path: "/usr/lib/dsp:/opt/dsp")
      assert %Check{status: :warn, remedy: remedy} = check(checks, :dsp_library_path)
      assert remedy =~ "separate the folders with `;`: /usr/lib/dsp;/opt/dsp"
      # As FastRPC reads it: one folder that does not exist.
      assert check(checks, :skel_library).status == :error

      checks = diagnose(root, dsp_library_path: "/usr/lib/dsp;/opt/dsp")
      assert check(checks, :dsp_library_path).status == :ok
      assert check(checks, :skel_library).detail =~ "opt/dsp/libQnnHtpV68Skel.so (Hexagon)"
    end

    test "no DSP path set: a warning, and /usr/lib/dsp searched" do
      if System.get_env("DSP_LIBRARY_PATH") in [nil, ""] and
           System.get_env("ADSP_LIBRARY_PATH") in [nil, ""] do
        checks =
          HexagonTpu.diagnose(root: fake_root!(), machine: :aarch64, device_creation: false)

        assert %Check{status: :warn, remedy: "set DSP_LIBRARY_PATH=/usr/lib/dsp" <> _} =
                 check(checks, :dsp_library_path)

        assert check(checks, :skel_library).status == :ok
      end
    end

    test "no fastrpc device" do
      root = fake_root!(%{"dev/fastrpc-cdsp" => nil, "dev" => :dir})
      checks = diagnose(root)

      assert %Check{status: :error, detail: detail, remedy: "use a kernel with the FastRPC" <> _} =
               check(checks, :fastrpc_device)

      assert detail == "no #{root}/dev/fastrpc-cdsp* or #{root}/dev/adsprpc-smd"
    end

    test "a fastrpc device that cannot be opened: a directory, a dangling symlink" do
      checks =
        diagnose(
          fake_root!(%{
            "dev/fastrpc-cdsp" => :dir,
            "dev/adsprpc-smd" => {:symlink, "/nonexistent/adsprpc-smd"}
          })
        )

      assert %Check{status: :error, detail: detail, remedy: remedy} =
               check(checks, :fastrpc_device)

      assert detail =~ "adsprpc-smd is a dangling symlink"
      assert detail =~ "fastrpc-cdsp is a directory, not a device"
      assert remedy =~ "read-write access"

      # One device that opens is enough.
      checks = diagnose(fake_root!(%{"dev/fastrpc-cdsp-secure" => :dir}))

      assert %Check{status: :ok, detail: detail} = check(checks, :fastrpc_device)
      assert detail =~ "fastrpc-cdsp opens"
    end

    test "no cdsprpcd" do
      checks = diagnose(fake_root!(%{"proc/731/comm" => "cdsprpcd-not\n"}))
      assert %Check{status: :error, detail: detail} = check(checks, :cdsprpcd)
      assert detail =~ "no cdsprpcd process in"
    end

    test "no remote heap node; the node under /sys/firmware/devicetree/base" do
      checks =
        diagnose(
          fake_root!(%{
            "proc/device-tree/reserved-memory/cdsp-rpc-remote-heap" => nil,
            "proc/device-tree/soc/fastrpc" => :dir
          })
        )

      assert %Check{status: :error, detail: detail} = check(checks, :remote_heap)
      assert detail =~ "no cdsp-rpc-remote-heap node"

      # No device tree at all: the places looked at, under the root.
      root = fake_root!(%{"proc/device-tree/reserved-memory/cdsp-rpc-remote-heap" => nil})

      assert %Check{status: :error, detail: detail, remedy: "boot with a device tree" <> _} =
               check(diagnose(root), :remote_heap)

      assert detail ==
               "no device tree (#{root}/proc/device-tree, #{root}/sys/firmware/devicetree/base)"

      checks =
        diagnose(
          fake_root!(%{
            "proc/device-tree/reserved-memory/cdsp-rpc-remote-heap" => nil,
            "sys/firmware/devicetree/base/soc/qcom,cdsp-rpc-remote-heap@0" => :dir
          })
        )

      assert check(checks, :remote_heap).status == :ok
    end
  end

  describe "a root that is not a running system" do
    test "an overlay (libraries only): no /dev, /proc or /sys, so check on the board" do
      root =
        fake_root!(%{
          "dev/fastrpc-cdsp" => nil,
          "proc/1/comm" => nil,
          "proc/731/comm" => nil,
          "proc/device-tree/reserved-memory/cdsp-rpc-remote-heap" => nil
        })

      checks = diagnose(root)
      assert Enum.map(checks, & &1.name) == @names
      assert Enum.all?(Enum.take(checks, 6), &(&1.status == :ok)), Diagnosis.format(checks)

      for {name, missing} <- [
            fastrpc_device: "#{root}/dev",
            cdsprpcd: "#{root}/proc",
            remote_heap: "#{root}/proc or #{root}/sys"
          ] do
        assert check(checks, name) == %Check{
                 name: name,
                 status: :error,
                 detail: "no #{missing}: #{root} is not the root of a running system",
                 remedy: "run the doctor on the board (HexagonTpu.diagnose/1 in IEx)"
               }
      end
    end
  end

  describe "device creation" do
    test "on qnn_sim: created and closed; the DSP checks are not needed" do
      checks = HexagonTpu.diagnose(Support.runtime_opts())
      assert Enum.all?(checks, &(&1.status == :ok)), Diagnosis.format(checks)
      assert %Check{detail: "backend and device created: " <> _} = check(checks, :device_creation)
      assert check(checks, :fastrpc_device).detail =~ "not needed"
      assert :ok = HexagonTpu.availability(Support.runtime_opts())
    end

    test "a creation that never answers is abandoned after the timeout" do
      started = System.monotonic_time(:millisecond)

      checks =
        HexagonTpu.diagnose(
          Support.runtime_opts() ++
            [timeout: 200, create: fn _ -> Process.sleep(:infinity) end]
        )

      assert System.monotonic_time(:millisecond) - started < 5_000

      assert %Check{status: :error, detail: "device creation did not answer within 200 ms"} =
               check(checks, :device_creation)

      refute_received {:DOWN, _, _, _, _}
      refute_received {_ref, _}
    end

    test "a creation that crashes is an error, not a crash" do
      checks = HexagonTpu.diagnose(Support.runtime_opts() ++ [create: fn _ -> raise "boom" end])

      assert %Check{status: :error, detail: detail} = check(checks, :device_creation)
      assert detail =~ "crashed" and detail =~ "boom"
    end

    test "a backend that will not open" do
      checks = HexagonTpu.diagnose(lib_path: "/nonexistent/libQnnHtp.so")
      assert check(checks, :backend_library).status == :error
      assert %Check{status: :error, detail: detail} = check(checks, :device_creation)
      assert detail =~ "/nonexistent/libQnnHtp.so"
    end

    test "a board's libraries are not opened by an x86-64 VM" do
      checks =
        HexagonTpu.diagnose(
          root: fake_root!(),
          machine: :aarch64,
          dsp_library_path: "/usr/lib/dsp"
        )

      if :erlang.system_info(:system_architecture)
         |> to_string()
         |> String.starts_with?("x86_64") do
        assert %Check{
                 status: :error,
                 detail: "not tried: the backend is aarch64, this VM runs on x86-64"
               } = check(checks, :device_creation)
      end
    end

    @tag :qnn_host
    test "on Qualcomm's x86-64 HTP emulator: every check ok, the backend's build id" do
      checks = HexagonTpu.diagnose(QnnHost.runtime_opts())
      assert Enum.all?(checks, &(&1.status == :ok)), Diagnosis.format(checks)
      assert check(checks, :backend_library).detail =~ ~r/\(x86-64, glibc\), QAIRT v2\.51\.0\./
      assert check(checks, :device_creation).detail =~ ~r/^backend and device created: .*v2\.51/
    end
  end

  describe "mix hexagon_tpu.doctor" do
    test "prints one line per check and exits 1 on an error" do
      root = fake_root!(%{"proc/731/comm" => nil})

      stderr =
        ExUnit.CaptureIO.capture_io(:stderr, fn ->
          send(
            self(),
            {:stdout,
             ExUnit.CaptureIO.capture_io(fn ->
               assert catch_exit(
                        Mix.Tasks.HexagonTpu.Doctor.run(
                          ~w(--root #{root} --machine aarch64 --dsp-library-path /usr/lib/dsp --no-device-creation)
                        )
                      ) == {:shutdown, 1}
             end)}
          )
        end)

      assert stderr =~ "1 of 9 checks failed"
      assert_received {:stdout, output}

      assert output =~ "✓ backend_library: #{root}/usr/lib/libQnnHtp.so (aarch64, glibc)"
      assert output =~ "✗ cdsprpcd: no cdsprpcd process in #{root}/proc\n    -> start cdsprpcd"
      assert length(String.split(output, ~r/^[✓!✗] /mu)) == length(@names) + 1
    end

    test "exits normally when every check is ok" do
      output =
        ExUnit.CaptureIO.capture_io(fn ->
          Mix.Tasks.HexagonTpu.Doctor.run(
            ~w(--root #{fake_root!()} --machine aarch64 --dsp-library-path /usr/lib/dsp --no-device-creation)
          )
        end)

      refute output =~ "✗"
    end
  end
end
