defmodule HexagonTpu.Runtime do
  @moduledoc """
  A QNN backend, opened: the backend library (`libQnnHtp.so` on the device), the QnnSystem
  library, and the QNN backend and device handles created from them.

  Everything else hangs off a runtime: `HexagonTpu.Context` loads context binaries into it.
  The libraries are opened here, not when the NIF loads, so a device without QNN still boots.

  ## Which libraries

  For each library, in this order: the function option, then an environment variable, then
  the device default:

  | library  | option             | environment variable       | default                    |
  |----------|--------------------|----------------------------|----------------------------|
  | backend  | `:lib_path`        | `HEXAGON_TPU_BACKEND_LIB`  | `/usr/lib/libQnnHtp.so`    |
  | system   | `:system_lib_path` | `HEXAGON_TPU_SYSTEM_LIB`   | `/usr/lib/libQnnSystem.so` |
  | rpcmem   | `:rpcmem_lib_path` | `HEXAGON_TPU_RPCMEM_LIB`   | `libcdsprpc.so`            |

  rpcmem (FastRPC's shared-memory allocator) is opened only by a context that uses shared
  buffers (`shared_buffers:` of `HexagonTpu.Context.from_file/3`), so a missing one is no
  error here; `libcdsprpc.so` is found where the dynamic linker looks.

  `htp/1` skips the environment variables: it always means the device's HTP backend.

  A path is a binary or a charlist. Linux paths are bytes, so a binary that is not UTF-8 is
  opened as it is (messages show such bytes as U+FFFD). An empty path, from an option or an
  environment variable that is set but empty, is refused with
  `{:error, %HexagonTpu.Error{reason: :invalid_argument}}` naming where it came from
  (`dlopen("")` would open the VM's own executable), and so is a path with a NUL byte.

  On the Dragon Q6A the HTP backend also needs its DSP skeleton libraries: set
  `DSP_LIBRARY_PATH=/usr/lib/dsp` (or `ADSP_LIBRARY_PATH`) in the VM's environment.

  ## Lifetime

  A runtime is freed when it is garbage collected and no context loaded into it is alive,
  or deterministically with `close/1`. Closing a runtime whose contexts are still alive
  makes it unusable for new contexts at once; its QNN handles are released when the last of
  those contexts goes.
  """

  alias HexagonTpu.{Args, Error, Native, Performance, Site}

  @default_backend_lib "/usr/lib/libQnnHtp.so"
  @default_system_lib "/usr/lib/libQnnSystem.so"
  @default_rpcmem_lib "libcdsprpc.so"

  @log_levels [:error, :warn, :info, :verbose, :debug]
  @default_performance_idle 300
  @options_list [
    lib_path: [
      type: {:or, [nil, {:custom, Args, :path, []}]},
      type_doc: Args.path_type(),
      doc: "The backend library (see \"Which libraries\")."
    ],
    system_lib_path: [
      type: {:or, [nil, {:custom, Args, :path, []}]},
      type_doc: Args.path_type(),
      doc: "The QnnSystem library."
    ],
    rpcmem_lib_path: [
      type: {:or, [nil, {:custom, Args, :path, []}]},
      type_doc: Args.path_type(),
      doc: "rpcmem's library, for contexts with shared buffers (a UTF-8 path)."
    ],
    log_level: [
      type: {:in, [nil, :none, :warning | @log_levels]},
      type_doc: "one of #{Enum.map_join(@log_levels, ", ", &inspect/1)} or :none",
      doc: """
      The most verbose level of QNN's own log forwarded to `Logger`; `nil` is \
      `:warn`, so a failure's explanation from QNN is logged (QNN's known start-up \
      chatter is logged at `:debug`, see `HexagonTpu.QnnLog`). QNN's lines are \
      rate-limited (`HexagonTpu.QnnLog`); none go to stdout.
      """
    ],
    performance: [
      type: {:in, [nil | Performance.modes()]},
      type_doc: Performance.type_doc(),
      doc: """
      The runtime's HTP performance mode (see `HexagonTpu.Performance`), voted when \
      the runtime is created; `nil` is `:default` (no vote). A refused vote is logged \
      and counted, and the runtime is created anyway.
      """
    ],
    performance_idle: [
      type: {:or, [nil, :non_neg_integer]},
      type_doc: "a non-negative integer",
      doc: """
      Milliseconds without a call after which a call's own `:performance` gives way \
      to the runtime's mode again; `nil` is #{@default_performance_idle}.
      """
    ]
  ]
  @options Args.schema!(@options_list)

  defstruct [:ref, :backend_lib, :system_lib, :info]

  @typedoc """
  Backend information reported by the libraries: `:backend_id`, `:provider_name`,
  `:build_id`, `:core_api`, `:backend_api`, `:system_api` (version strings such as
  `"2.32.0"`), `:backend_lib`, `:system_lib`, and `:device`: what the device reports about
  itself (`deviceGetPlatformInfo`) as `%{soc_model: 35, htp_arch: 68, vtcm_size: bytes}` (a
  field the device does not give is `nil`), or `nil` when the backend reports nothing (the x86
  emulator, a board whose DSP does not answer). The pre-flight verdict compares a binary's SoC
  model and HTP arch with these (see `HexagonTpu.Context.from_file/3`).
  """
  @type info :: %{
          backend_id: non_neg_integer(),
          provider_name: String.t(),
          build_id: String.t(),
          core_api: String.t(),
          backend_api: String.t(),
          system_api: String.t(),
          backend_lib: String.t(),
          system_lib: String.t(),
          device:
            %{
              soc_model: non_neg_integer() | nil,
              htp_arch: non_neg_integer() | nil,
              vtcm_size: non_neg_integer() | nil
            }
            | nil
        }

  @type t :: %__MODULE__{
          ref: reference(),
          backend_lib: binary(),
          system_lib: binary(),
          info: info()
        }

  @typedoc """
  The most verbose level of QNN's own log that reaches `Logger` (see `HexagonTpu.QnnLog`), or
  `:none` to create no QNN log at all.
  """
  @type log_level :: :error | :warn | :info | :verbose | :debug | :none

  @type option ::
          {:lib_path, Path.t()}
          | {:system_lib_path, Path.t()}
          | {:rpcmem_lib_path, Path.t()}
          | {:log_level, log_level() | nil}
          | {:performance, Performance.mode()}
          | {:performance_idle, non_neg_integer()}

  @doc """
  Opens a QNN backend.

  Options:

  #{NimbleOptions.docs(@options)}

  ## Examples

      {:ok, runtime} = HexagonTpu.Runtime.create()

      {:ok, runtime} =
        HexagonTpu.Runtime.create(
          lib_path: "/opt/qnn/lib/libQnnCpu.so",
          system_lib_path: "/opt/qnn/lib/libQnnSystem.so"
        )
  """
  @spec create([option()]) :: {:ok, t()} | {:error, Error.t()}
  def create(opts \\ []), do: create_at(opts, Site.caller())

  @doc false
  # `create/1` with the creation site given (`HexagonTpu.load_model/2`'s shared runtimes).
  @spec create_at([option()], String.t()) :: {:ok, t()} | {:error, Error.t()}
  def create_at(opts, site) do
    opts = options!(opts, "HexagonTpu.Runtime.create/1")

    open(
      library(opts, :lib_path, "HEXAGON_TPU_BACKEND_LIB", @default_backend_lib),
      library(opts, :system_lib_path, "HEXAGON_TPU_SYSTEM_LIB", @default_system_lib),
      library(opts, :rpcmem_lib_path, "HEXAGON_TPU_RPCMEM_LIB", @default_rpcmem_lib),
      opts,
      site
    )
  end

  @doc """
  Opens the device's HTP (NPU) backend: `/usr/lib/libQnnHtp.so` and
  `/usr/lib/libQnnSystem.so` unless `:lib_path` / `:system_lib_path` say otherwise.
  Environment variables are not consulted. Takes the options of `create/1`.
  """
  @spec htp([option()]) :: {:ok, t()} | {:error, Error.t()}
  def htp(opts \\ []) do
    opts = options!(opts, "HexagonTpu.Runtime.htp/1")

    open(
      library(opts, :lib_path, nil, @default_backend_lib),
      library(opts, :system_lib_path, nil, @default_system_lib),
      library(opts, :rpcmem_lib_path, nil, @default_rpcmem_lib),
      opts,
      Site.caller()
    )
  end

  @doc "Like `create/1`, but raises `HexagonTpu.Error`."
  @spec create!([option()]) :: t()
  def create!(opts \\ []), do: opts |> create() |> Error.unwrap!()

  @doc "Like `htp/1`, but raises `HexagonTpu.Error`."
  @spec htp!([option()]) :: t()
  def htp!(opts \\ []), do: opts |> htp() |> Error.unwrap!()

  @doc false
  # The options of create/1 with their types checked (ArgumentError naming `fun` otherwise):
  # paths as binaries, the log level as the NIF takes it. Used by HexagonTpu too.
  @spec options!(term(), String.t()) :: keyword()
  def options!(opts, fun) do
    opts = Args.options!(opts, @options, fun)
    why = "milliseconds as an unsigned 64-bit integer"
    Args.at_most!(opts[:performance_idle], Args.max_u64(), :performance_idle, why, fun)
    # Logger's name for :warn, as :warn: load_model/2 shares one runtime for both.
    if opts[:log_level] == :warning, do: Keyword.replace!(opts, :log_level, :warn), else: opts
  end

  @doc false
  # The options' schema, for a function that takes some of them beside its own (HexagonTpu).
  @spec options() :: keyword()
  def options, do: @options_list

  @doc false
  # The System library HexagonTpu.inspect_model/2 opens: the option, else the environment
  # variable, else the default; with how it was given.
  @spec system_lib(term(), String.t()) :: {binary(), String.t()}
  def system_lib(path, fun) do
    opts = options!([system_lib_path: path], fun)
    library(opts, :system_lib_path, "HEXAGON_TPU_SYSTEM_LIB", @default_system_lib)
  end

  @doc false
  # The backend and System library paths create/1 opens for `opts` (checked options), so the
  # doctor (HexagonTpu.Diagnosis) looks where the runtime does.
  @spec library_paths(keyword()) :: {binary(), binary()}
  def library_paths(opts) do
    {backend, _} = library(opts, :lib_path, "HEXAGON_TPU_BACKEND_LIB", @default_backend_lib)
    {system, _} = library(opts, :system_lib_path, "HEXAGON_TPU_SYSTEM_LIB", @default_system_lib)
    {backend, system}
  end

  # The library path to open, and how the caller gave it (for the message when it is unusable).
  defp library(opts, key, env, default) do
    cond do
      opts[key] -> {opts[key], "the #{inspect(key)} option"}
      env && System.get_env(env) -> {System.get_env(env), "the environment variable #{env}"}
      true -> {default, "the default #{inspect(key)}"}
    end
  end

  defp open({backend_lib, backend_what}, {system_lib, system_what}, rpcmem, opts, site) do
    {rpcmem_lib, rpcmem_what} = rpcmem

    with :ok <- Args.check_path(backend_lib, backend_what),
         :ok <- Args.check_path(system_lib, system_what),
         :ok <- Args.check_path(rpcmem_lib, rpcmem_what),
         :ok <- check_utf8(rpcmem_lib, rpcmem_what) do
      # The NIF's RuntimeArg (src/protocol.rs).
      args = %{
        log_level: nif_log_level(opts[:log_level]),
        performance: opts[:performance] || :default,
        performance_idle: opts[:performance_idle] || @default_performance_idle,
        rpcmem_lib: rpcmem_lib,
        site: site
      }

      case Native.call(&Native.runtime_create(backend_lib, system_lib, args, &1)) do
        {:ok, %{runtime: ref, info: info}} ->
          {:ok,
           %__MODULE__{ref: ref, backend_lib: backend_lib, system_lib: system_lib, info: info}}

        {:error, %Error{}} = error ->
          error
      end
    end
  end

  defp check_utf8(path, what) do
    if String.valid?(path),
      do: :ok,
      else: Args.invalid_argument("#{what} must be a UTF-8 path: #{Args.quote_input(path)}")
  end

  defp nif_log_level(nil), do: :warn
  defp nif_log_level(:none), do: nil
  defp nif_log_level(level), do: level

  @doc """
  Backend information: ids, build id and API versions (see `t:info/0`).

  Returns `{:error, %HexagonTpu.Error{reason: :closed}}` once the runtime is closed.
  """
  @spec info(t()) :: {:ok, info()} | {:error, Error.t()}
  def info(%__MODULE__{ref: ref}) when is_reference(ref), do: Native.runtime_info(ref)
  def info(other), do: not_a_runtime!(other, "info/1")

  @doc """
  Changes the runtime's performance mode (see `HexagonTpu.Performance`) and votes it, unless a
  call's own `:performance` is in force: then once that gives way. Returns `:ok` whether or not
  the backend takes the vote (a refusal is logged and counted, see `HexagonTpu.Performance`);
  `{:error, %HexagonTpu.Error{reason: :closed}}` once the runtime is closed. Runs on a dirty IO
  scheduler (a vote is an RPC to the DSP).

  ## Examples

      :ok = HexagonTpu.Runtime.set_performance(runtime, :burst)
  """
  @spec set_performance(t(), Performance.mode()) :: :ok | {:error, Error.t()}
  def set_performance(%__MODULE__{ref: ref}, mode) when is_reference(ref) do
    mode = Performance.mode!(mode, "HexagonTpu.Runtime.set_performance/2")
    Native.runtime_set_performance(ref, mode)
  end

  def set_performance(other, _mode), do: not_a_runtime!(other, "set_performance/2")

  @doc """
  The runtime's performance state: `%{mode: mode, voted: mode, available: boolean, last_vote:
  vote | nil}`. `:mode` is the runtime's own mode, `:voted` the mode last voted (a call's own
  mode while it is in force; accepted or refused), `:available` whether the backend gave the
  runtime a power config id, and `:last_vote` the vote in force: `%{mode:, dcvs_v3: %{contextId:
  ..., coreVoltageCornerMax: ...}, rpc_polling_time:}` with the DCVS v3 fields as QNN names them,
  or `nil` when none is (nothing voted, refused, or `:default`).
  """
  @spec performance(t()) :: {:ok, map()} | {:error, Error.t()}
  def performance(%__MODULE__{ref: ref}) when is_reference(ref),
    do: Native.runtime_performance(ref)

  def performance(other), do: not_a_runtime!(other, "performance/1")

  @doc "Whether `close/1` was called on this runtime."
  @spec closed?(t()) :: boolean()
  def closed?(%__MODULE__{ref: ref}) when is_reference(ref), do: Native.runtime_closed(ref)
  def closed?(other), do: not_a_runtime!(other, "closed?/1")

  @doc """
  Releases the runtime now instead of at garbage collection.

  Later calls with it return `{:error, %HexagonTpu.Error{reason: :closed}}`, and so does a
  second `close/1`. Contexts already loaded into it keep working; the QNN handles are
  released when the last of them is closed or collected.
  """
  @spec close(t()) :: :ok | {:error, Error.t()}
  def close(%__MODULE__{ref: ref}) when is_reference(ref),
    do: Native.call(&Native.runtime_close(ref, &1))

  def close(other), do: not_a_runtime!(other, "close/1")

  defp not_a_runtime!(other, fun),
    do: Args.type_error!("HexagonTpu.Runtime.#{fun}", "`runtime`", "a HexagonTpu.Runtime", other)

  defimpl Inspect do
    def inspect(runtime, _opts) do
      "#HexagonTpu.Runtime<#{Path.basename(runtime.backend_lib)}" <>
        " #{runtime.info[:provider_name]} core API #{runtime.info[:core_api]}>"
    end
  end
end
