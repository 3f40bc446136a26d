defmodule HexagonTpu.Diagnosis do
  @moduledoc """
  The doctor: whether this machine can run models on the NPU, and if not, why, as a list of
  checks (`HexagonTpu.Diagnosis.Check`), each `:ok`, `:warn` or `:error` with a one-line remedy.
  The engine of `HexagonTpu.diagnose/1` and `mix hexagon_tpu.doctor`.

  In order:

    1. `:backend_library`, `:system_library` - found where `HexagonTpu.Runtime.create/1` looks,
       an ELF file for this machine's CPU, built for glibc (not Android), and the backend's
       QAIRT build id
    2. `:stub_library` - `libQnnHtpV<arch>Stub.so` beside the backend
    3. `:dsp_library_path` - `DSP_LIBRARY_PATH` / `ADSP_LIBRARY_PATH` (FastRPC splits them on
       `;`: a `:`-separated list is one folder that does not exist)
    4. `:skel_library` - `libQnnHtpV<arch>Skel.so` on that path (default `/usr/lib/dsp`), a
       Hexagon ELF file
    5. `:one_build` - backend, stub and skel carry the same QAIRT build id
    6. `:fastrpc_device` - `/dev/fastrpc-cdsp*` or `/dev/adsprpc-smd`, a device this user can
       open
    7. `:cdsprpcd` - the `cdsprpcd` daemon is running (`/proc/*/comm`)
    8. `:remote_heap` - the device tree has a `cdsp-rpc-remote-heap` node
    9. `:device_creation` - a real runtime (backend and device) created and closed, in its own
       process under a timeout: on timeout it is abandoned, never awaited

  Checks 2 to 8 are about the DSP: they apply when the backend is the device's HTP library
  (`libQnnHtp*.so` for aarch64). For Qualcomm's x86-64 HTP emulator or another backend they
  are `:ok` with "not needed" (the emulator runs on the CPU).

  With `:root`, checks 6 to 8 look in the root's `dev`, `proc` and `sys`. A root without them
  (a rootfs overlay, an image) is not a running system: those checks are errors that say so,
  with the remedy to run the doctor on the board.

  Nothing here crashes or hangs the caller: files are read in bounded pieces
  (`HexagonTpu.Elf`), only regular files are read and only devices opened, directory scans are
  bounded, and device creation runs under `:timeout`.
  """

  alias HexagonTpu.{Args, Elf, Error, Python, Runtime}
  alias HexagonTpu.Diagnosis.Dsp

  defmodule Check do
    @moduledoc "One finding of the doctor (`HexagonTpu.Diagnosis`)."

    defstruct [:name, :status, :detail, remedy: nil]

    @typedoc """
    `:name` says what was checked (see `HexagonTpu.Diagnosis` for the list), `:detail` what
    was found, `:remedy` (nil when `:ok`) what to do about it, in one line each.
    """
    @type t :: %__MODULE__{
            name: atom(),
            status: :ok | :warn | :error,
            detail: String.t(),
            remedy: String.t() | nil
          }

    @doc false
    def ok(name, detail), do: %__MODULE__{name: name, status: :ok, detail: detail}

    @doc false
    def warn(name, detail, remedy),
      do: %__MODULE__{name: name, status: :warn, detail: detail, remedy: remedy}

    @doc false
    def error(name, detail, remedy),
      do: %__MODULE__{name: name, status: :error, detail: detail, remedy: remedy}
  end

  @options Args.schema!(
             Keyword.take(Runtime.options(), [:lib_path, :system_lib_path, :log_level]) ++
               [
                 root: [
                   type: {:or, [nil, {:custom, Args, :path, []}]},
                   default: nil,
                   type_doc: Args.path_type(),
                   doc: """
                   Another root filesystem (a rootfs overlay, a board's image): every \
                   path-based check looks under it, and the device creation opens the libraries \
                   found there (with this machine's kernel, devices and other libraries). \
                   Symlinks are followed as this machine resolves them: an absolute one points \
                   outside the root. A root without `dev`, `proc` or `sys` (an overlay) is \
                   reported as not a running system.
                   """
                 ],
                 htp_arch: [
                   type: :pos_integer,
                   default: 68,
                   type_doc: "a positive integer",
                   doc: "The HTP architecture whose stub and skel to look for (68: QCS6490)."
                 ],
                 dsp_library_path: [
                   type: {:or, [nil, :string]},
                   default: nil,
                   type_doc: "a string",
                   doc: "Instead of `DSP_LIBRARY_PATH` / `ADSP_LIBRARY_PATH`."
                 ],
                 machine: [
                   type: {:in, [nil, :x86_64, :aarch64]},
                   default: nil,
                   type_doc: ":x86_64 or :aarch64",
                   doc: "The CPU the libraries must be built for; `nil`: this VM's."
                 ],
                 timeout: [
                   type: :pos_integer,
                   default: 10_000,
                   type_doc: "a positive integer (ms)",
                   doc: "For the device creation, in milliseconds."
                 ],
                 device_creation: [
                   type: :boolean,
                   default: true,
                   type_doc: "a boolean",
                   doc: "`false` skips the last check."
                 ],
                 create: [
                   type: {:fun, 1},
                   default: &Runtime.create/1,
                   type_doc: "a function of arity 1",
                   # for tests: the function that creates the runtime (Runtime.create/1)
                   doc: false
                 ]
               ]
           )

  @doc false
  # The options' schema, for HexagonTpu.diagnose/1's docs.
  @spec options() :: NimbleOptions.t()
  def options, do: @options

  # The checks in the order run/2 returns them (the moduledoc's list, which doctor_test
  # compares with this): the library checks, the DSP ones, then device creation.
  @dsp_checks ~w(stub_library dsp_library_path skel_library one_build fastrpc_device cdsprpcd
                 remote_heap)a
  @checks [:backend_library, :system_library] ++ @dsp_checks ++ [:device_creation]

  @doc false
  @spec checks() :: [atom()]
  def checks, do: @checks

  @default_dsp_path "/usr/lib/dsp"

  @doc """
  Runs every check; see `HexagonTpu.diagnose/1` for the options.
  """
  @spec run(keyword(), String.t()) :: [Check.t()]
  def run(opts, fun \\ "HexagonTpu.diagnose/1") do
    opts = options!(opts, fun)
    cheap = cheap(opts)

    if opts[:device_creation] == false,
      do: cheap,
      else: cheap ++ [device_creation(opts)]
  end

  @doc false
  # Every check but the build ids (they read whole libraries) and device creation:
  # HexagonTpu.availability/1's. `opts` as checked by options!/2.
  @spec cheap(keyword(), boolean()) :: [Check.t()]
  def cheap(opts, build_ids? \\ true) do
    root = opts[:root]
    {backend, system} = Runtime.library_paths(opts)
    machine = opts[:machine] || host_machine()
    arch = opts[:htp_arch]

    backend_check = library(:backend_library, "backend", Dsp.in_root(root, backend), machine)
    system_check = library(:system_library, "System library", Dsp.in_root(root, system), machine)
    backend_info = Elf.read(Dsp.in_root(root, backend))

    dsp? =
      case backend_info do
        {:ok, %{machine: :aarch64}} -> String.starts_with?(Path.basename(backend), "libQnnHtp")
        {:ok, _} -> false
        # Not readable: say everything we can about a device.
        {:error, _} -> true
      end

    checks =
      if dsp? do
        stub = Dsp.in_root(root, Path.join(Path.dirname(backend), "libQnnHtpV#{arch}Stub.so"))
        {dsp_check, dsp_dirs} = dsp_library_path(opts)
        skel_name = "libQnnHtpV#{arch}Skel.so"

        skel =
          Enum.find(
            Enum.map(dsp_dirs, &Dsp.in_root(root, Path.join(&1, skel_name))),
            &File.exists?/1
          )

        by_name = %{
          stub_library: library(:stub_library, "stub", stub, machine),
          dsp_library_path: dsp_check,
          skel_library: skel_library(skel, skel_name, dsp_dirs),
          one_build: if(build_ids?, do: one_build(Dsp.in_root(root, backend), stub, skel)),
          fastrpc_device: Dsp.fastrpc_device(root),
          cdsprpcd: Dsp.cdsprpcd(root),
          remote_heap: Dsp.remote_heap(root)
        }

        Enum.map(@dsp_checks, &Map.fetch!(by_name, &1))
      else
        why =
          case backend_info do
            {:ok, %{machine: :aarch64}} -> "the backend is not Qualcomm's HTP library"
            {:ok, info} -> "the backend is #{Elf.machine_name(info.machine)}, not the device's"
          end

        for name <- @dsp_checks,
            name != :one_build or build_ids?,
            do: Check.ok(name, "not needed: #{why} (no DSP involved)")
      end

    backend_check =
      if build_ids? and backend_check.status == :ok,
        do: with_build_id(backend_check, Dsp.in_root(root, backend)),
        else: backend_check

    Enum.reject([backend_check, system_check | checks], &is_nil/1)
  end

  @doc """
  The first `:error` of `checks` as a `HexagonTpu.Error` (reason `:diagnosis`), or nil.
  """
  @spec first_error([Check.t()]) :: Error.t() | nil
  def first_error(checks) do
    Enum.find_value(checks, fn
      %Check{status: :error} = check ->
        Error.new(:diagnosis, "#{check.name}: #{check.detail}; #{check.remedy}")

      _ ->
        nil
    end)
  end

  @doc "The checks as lines: `✓`, `!` or `✗`, the name, what was found and the remedy."
  @spec format([Check.t()]) :: String.t()
  def format(checks) do
    Enum.map_join(checks, "\n", fn check ->
      mark = %{ok: "✓", warn: "!", error: "✗"}[check.status]
      line = "#{mark} #{check.name}: #{check.detail}"
      if check.remedy, do: line <> "\n    -> " <> check.remedy, else: line
    end)
  end

  @doc false
  @spec options!(term(), String.t()) :: keyword()
  def options!(opts, fun) do
    opts = Args.options!(opts, @options, fun)
    Args.at_most!(opts[:timeout], Args.max_timeout(), :timeout, "receive's limit", fun)
    opts
  end

  # ------------------------------------------------------------------------------ libraries

  defp library(name, what, path, machine) do
    case Elf.read(path) do
      {:error, message} ->
        remedy =
          if File.exists?(path) or match?({:ok, _}, File.lstat(path)),
            do: "replace it with QNN's #{what} library (mix hexagon_tpu.runtime --into DIR)",
            else:
              "install QNN's runtime (mix hexagon_tpu.runtime --into your rootfs_overlay) " <>
                "or give its path"

        Check.error(name, message, remedy)

      {:ok, %{machine: ^machine, variant: variant} = info} when variant in [:glibc, :unknown] ->
        Check.ok(name, "#{path} (#{Elf.machine_name(info.machine)}, #{variant_name(variant)})")

      {:ok, %{machine: ^machine, variant: variant}} ->
        Check.error(
          name,
          "#{path} is built for #{variant_name(variant)}, this system runs glibc",
          "use the Linux (glibc) build of QNN, not the Android one: mix hexagon_tpu.runtime"
        )

      {:ok, info} ->
        Check.error(
          name,
          "#{path} is #{Elf.machine_name(info.machine)}, this machine is " <>
            Elf.machine_name(machine),
          "install the #{Elf.machine_name(machine)} build of QNN's #{what} library"
        )
    end
  end

  defp variant_name(:glibc), do: "glibc"
  defp variant_name(:android), do: "Android (bionic)"
  defp variant_name(:musl), do: "musl"
  defp variant_name(:unknown), do: "no C library named"

  defp with_build_id(check, path) do
    case Elf.build_id(path) do
      {:ok, nil} -> %{check | detail: check.detail <> ", no QAIRT build id"}
      {:ok, id} -> %{check | detail: check.detail <> ", QAIRT #{id}"}
      {:error, message} -> Check.warn(check.name, message, "check the file")
    end
  end

  defp dsp_library_path(opts) do
    {value, source} =
      cond do
        opts[:dsp_library_path] -> {opts[:dsp_library_path], "the :dsp_library_path option"}
        Python.env("DSP_LIBRARY_PATH") -> {Python.env("DSP_LIBRARY_PATH"), "DSP_LIBRARY_PATH"}
        Python.env("ADSP_LIBRARY_PATH") -> {Python.env("ADSP_LIBRARY_PATH"), "ADSP_LIBRARY_PATH"}
        true -> {nil, nil}
      end

    cond do
      value == nil ->
        {Check.warn(
           :dsp_library_path,
           "neither DSP_LIBRARY_PATH nor ADSP_LIBRARY_PATH is set; looking in #{@default_dsp_path}",
           "set DSP_LIBRARY_PATH=#{@default_dsp_path} in the VM's environment"
         ), [@default_dsp_path]}

      String.contains?(value, ":") and not String.contains?(value, ";") ->
        {Check.warn(
           :dsp_library_path,
           "#{source} is #{inspect(value)}: FastRPC splits it on `;`, not `:`",
           "separate the folders with `;`: #{String.replace(value, ":", ";")}"
         ), [value]}

      true ->
        {Check.ok(:dsp_library_path, "#{source} is #{inspect(value)}"),
         String.split(value, ";", trim: true)}
    end
  end

  defp skel_library(nil, name, dirs) do
    Check.error(
      :skel_library,
      "no #{name} in #{Enum.join(dirs, ";")}",
      "put #{name} (from the same QNN build as the backend) in #{@default_dsp_path} " <>
        "and set DSP_LIBRARY_PATH to it"
    )
  end

  defp skel_library(path, _name, _dirs) do
    case Elf.read(path) do
      {:ok, %{machine: :hexagon}} ->
        Check.ok(:skel_library, "#{path} (Hexagon)")

      {:ok, info} ->
        Check.error(
          :skel_library,
          "#{path} is #{Elf.machine_name(info.machine)}, not a Hexagon DSP library",
          "use the skel of QNN's device runtime (mix hexagon_tpu.runtime)"
        )

      {:error, message} ->
        Check.error(
          :skel_library,
          message,
          "replace it with QNN's skel (mix hexagon_tpu.runtime)"
        )
    end
  end

  defp one_build(backend, stub, skel) do
    ids =
      for {what, path} <- [backend: backend, stub: stub, skel: skel], path != nil do
        case Elf.build_id(path) do
          {:ok, id} -> {what, id}
          {:error, _} -> {what, nil}
        end
      end

    found = for {what, id} <- ids, id != nil, do: {what, id}

    case found |> Enum.map(&elem(&1, 1)) |> Enum.uniq() do
      [id] when length(found) == 3 ->
        Check.ok(:one_build, "backend, stub and skel are QAIRT #{id}")

      [_] ->
        missing = for {what, nil} <- ids, do: what
        missing = if skel == nil, do: missing ++ [:skel], else: missing

        Check.warn(
          :one_build,
          "only the #{Enum.map_join(found, ", ", &elem(&1, 0))} carry a build id " <>
            "(#{Enum.join(missing, ", ")}: none, or not found)",
          "install backend, stub and skel from one QNN build (mix hexagon_tpu.runtime)"
        )

      [] ->
        Check.warn(
          :one_build,
          "no build id found in backend, stub or skel",
          "install backend, stub and skel from one QNN build (mix hexagon_tpu.runtime)"
        )

      _ ->
        Check.error(
          :one_build,
          "different QNN builds: #{Enum.map_join(found, ", ", fn {w, id} -> "#{w} #{id}" end)}",
          "install backend, stub and skel from one QNN build (mix hexagon_tpu.runtime)"
        )
    end
  end

  # ------------------------------------------------------------------------ device creation

  defp device_creation(opts) do
    {backend, system} = Runtime.library_paths(opts)
    root = opts[:root]

    runtime_opts = [
      lib_path: Dsp.in_root(root, backend),
      system_lib_path: Dsp.in_root(root, system),
      log_level: opts[:log_level] || :error
    ]

    case Elf.read(runtime_opts[:lib_path]) do
      {:ok, %{machine: machine}} when machine not in [:hexagon] ->
        if machine == host_machine(),
          do: create_device(runtime_opts, opts),
          else:
            Check.error(
              :device_creation,
              "not tried: the backend is #{Elf.machine_name(machine)}, this VM runs on " <>
                Elf.machine_name(host_machine()),
              "run the doctor on the board (HexagonTpu.diagnose/1 in IEx)"
            )

      _ ->
        create_device(runtime_opts, opts)
    end
  end

  defp create_device(runtime_opts, opts) do
    timeout = opts[:timeout]
    create = opts[:create]
    parent = self()
    ref = make_ref()

    # Its own process: a crash is reported, and on timeout it is abandoned (killed; the native
    # work it waits for goes on without it and is freed when it ends), never awaited.
    {pid, monitor} =
      spawn_monitor(fn ->
        result =
          try do
            case create.(runtime_opts) do
              {:ok, runtime} ->
                info = runtime.info
                _ = Runtime.close(runtime)
                {:ok, info}

              other ->
                other
            end
          catch
            kind, reason -> {:crashed, Exception.format_banner(kind, reason, __STACKTRACE__)}
          end

        send(parent, {ref, result})
      end)

    receive do
      {^ref, result} ->
        Process.demonitor(monitor, [:flush])
        device_result(result)

      {:DOWN, ^monitor, :process, ^pid, reason} ->
        Check.error(
          :device_creation,
          "device creation crashed: #{Exception.format_exit(reason)}",
          "report this as a bug of hexagon_tpu"
        )
    after
      timeout ->
        Process.demonitor(monitor, [:flush])
        Process.exit(pid, :kill)

        Check.error(
          :device_creation,
          "device creation did not answer within #{timeout} ms",
          "check the DSP (cdsprpcd, dmesg for FastRPC/SSR errors), then try again"
        )
    end
  end

  defp device_result({:ok, info}) do
    Check.ok(
      :device_creation,
      "backend and device created: #{info[:provider_name]}, QAIRT #{info[:build_id]}, " <>
        "core API #{info[:core_api]}"
    )
  end

  defp device_result({:crashed, banner}) do
    Check.error(
      :device_creation,
      "device creation crashed: #{banner}",
      "report this as a bug of hexagon_tpu"
    )
  end

  defp device_result({:error, %Error{} = e}) do
    Check.error(
      :device_creation,
      e.message,
      "fix the errors above; on a board, check dmesg for FastRPC errors"
    )
  end

  defp device_result(other),
    do:
      Check.error(:device_creation, "unexpected answer #{inspect(other)}", "report this as a bug")

  # ------------------------------------------------------------------------------- helpers

  defp host_machine do
    case :erlang.system_info(:system_architecture) |> to_string() do
      "aarch64" <> _ -> :aarch64
      "arm64" <> _ -> :aarch64
      _ -> :x86_64
    end
  end
end
