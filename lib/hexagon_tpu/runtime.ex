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

  `htp/1` skips the environment variables: it always means the device's HTP backend.

  On the Dragon Q6A the HTP backend also needs its DSP skeleton libraries: set
  `DSP_LIBRARY_PATH=/usr/lib/dsp` (or `ADSP_LIBRARY_PATH`) in the VM's environment.

  ## Lifetime

  A runtime is freed when it is garbage collected and no context loaded into it is alive,
  or deterministically with `close/1`. Closing a runtime whose contexts are still alive
  makes it unusable for new contexts at once; its QNN handles are released when the last of
  those contexts goes.
  """

  alias HexagonTpu.{Error, Native, Site}

  @default_backend_lib "/usr/lib/libQnnHtp.so"
  @default_system_lib "/usr/lib/libQnnSystem.so"

  @log_levels [:error, :warn, :info, :verbose, :debug]

  defstruct [:ref, :backend_lib, :system_lib, :info]

  @typedoc """
  Backend information reported by the libraries: `:backend_id`, `:provider_name`,
  `:build_id`, `:core_api`, `:backend_api`, `:system_api` (version strings such as
  `"2.32.0"`), `:backend_lib`, `:system_lib`.
  """
  @type info :: %{
          backend_id: non_neg_integer(),
          provider_name: String.t(),
          build_id: String.t(),
          core_api: String.t(),
          backend_api: String.t(),
          system_api: String.t(),
          backend_lib: String.t(),
          system_lib: String.t()
        }

  @type t :: %__MODULE__{
          ref: reference(),
          backend_lib: String.t(),
          system_lib: String.t(),
          info: info()
        }

  @typedoc """
  The most verbose level of QNN's own log that reaches `Logger` (see `HexagonTpu.QnnLog`), or
  `:none` to create no QNN log at all.
  """
  @type log_level :: :error | :warn | :info | :verbose | :debug | :none

  @type option ::
          {:lib_path, Path.t()} | {:system_lib_path, Path.t()} | {:log_level, log_level() | nil}

  @doc """
  Opens a QNN backend.

  Options:

    * `:lib_path` - the backend library (see "Which libraries")
    * `:system_lib_path` - the QnnSystem library
    * `:log_level` - the most verbose level of QNN's own log forwarded to `Logger`, one of
      #{inspect(@log_levels)} or `:none`; default `:warn`, so a failure's explanation from
      QNN is logged. QNN's lines are rate-limited (`HexagonTpu.QnnLog`); none go to stdout

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
    opts = Keyword.validate!(opts, [:lib_path, :system_lib_path, :log_level])

    open(
      opts[:lib_path] || System.get_env("HEXAGON_TPU_BACKEND_LIB") || @default_backend_lib,
      opts[:system_lib_path] || System.get_env("HEXAGON_TPU_SYSTEM_LIB") || @default_system_lib,
      opts[:log_level],
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
    opts = Keyword.validate!(opts, [:lib_path, :system_lib_path, :log_level])

    open(
      opts[:lib_path] || @default_backend_lib,
      opts[:system_lib_path] || @default_system_lib,
      opts[:log_level],
      Site.caller()
    )
  end

  @doc "Like `create/1`, but raises `HexagonTpu.Error`."
  @spec create!([option()]) :: t()
  def create!(opts \\ []), do: opts |> create() |> Error.unwrap!()

  @doc "Like `htp/1`, but raises `HexagonTpu.Error`."
  @spec htp!([option()]) :: t()
  def htp!(opts \\ []), do: opts |> htp() |> Error.unwrap!()

  defp open(backend_lib, system_lib, log_level, site) do
    backend_lib = to_string(backend_lib)
    system_lib = to_string(system_lib)

    case Native.call(
           &Native.runtime_create(backend_lib, system_lib, log_level(log_level), site, &1)
         ) do
      {:ok, {ref, info}} ->
        {:ok, %__MODULE__{ref: ref, backend_lib: backend_lib, system_lib: system_lib, info: info}}

      {:error, %Error{}} = error ->
        error
    end
  end

  defp log_level(nil), do: :warn
  defp log_level(:none), do: nil
  defp log_level(:warning), do: :warn
  defp log_level(level) when level in @log_levels, do: level

  defp log_level(other) do
    raise ArgumentError,
          "invalid :log_level #{inspect(other)}, expected one of #{inspect(@log_levels)} or :none"
  end

  @doc """
  Backend information: ids, build id and API versions (see `t:info/0`).

  Returns `{:error, %HexagonTpu.Error{reason: :closed}}` once the runtime is closed.
  """
  @spec info(t()) :: {:ok, info()} | {:error, Error.t()}
  def info(%__MODULE__{ref: ref}), do: Native.runtime_info(ref)

  @doc "Whether `close/1` was called on this runtime."
  @spec closed?(t()) :: boolean()
  def closed?(%__MODULE__{ref: ref}), do: Native.runtime_closed(ref)

  @doc """
  Releases the runtime now instead of at garbage collection.

  Later calls with it return `{:error, %HexagonTpu.Error{reason: :closed}}`, and so does a
  second `close/1`. Contexts already loaded into it keep working; the QNN handles are
  released when the last of them is closed or collected.
  """
  @spec close(t()) :: :ok | {:error, Error.t()}
  def close(%__MODULE__{ref: ref}), do: Native.call(&Native.runtime_close(ref, &1))

  defimpl Inspect do
    def inspect(runtime, _opts) do
      "#HexagonTpu.Runtime<#{Path.basename(runtime.backend_lib)}" <>
        " #{runtime.info[:provider_name]} core API #{runtime.info[:core_api]}>"
    end
  end
end
