defmodule HexagonTpu.Python do
  @moduledoc false
  # The compile venv (the cache folder, the pin set, creating the venv once) and running
  # Python in it: shared by HexagonTpu.Compiler (whose public functions delegate here and
  # carry the docs), HexagonTpu.DeviceRuntime and HexagonTpu.Diagnosis (`env/1`).

  @requirements "requirements.txt"
  @marker "hexagon_tpu-requirements.txt"

  @spec cache_dir() :: Path.t()
  def cache_dir do
    cond do
      dir = env("HEXAGON_TPU_CACHE") -> Path.expand(dir)
      dir = env("XDG_CACHE_HOME") -> Path.join(Path.expand(dir), "hexagon_tpu")
      true -> Path.join(System.user_home!(), ".cache/hexagon_tpu")
    end
  end

  @spec priv_dir() :: Path.t()
  def priv_dir, do: Path.join(to_string(:code.priv_dir(:hexagon_tpu)), "compile")

  @spec venv_dir() :: Path.t()
  def venv_dir do
    pins = File.read!(requirements())

    version =
      case Regex.run(~r/^onnxruntime-qnn==(\S+)/m, pins) do
        [_, version] -> version
        nil -> "unpinned"
      end

    # The device runtime's pin (`# device-runtime:` lines) is not the venv's business.
    hash =
      pins
      |> String.replace(~r/^# device-runtime:.*\n/m, "")
      |> :erlang.md5()
      |> Base.encode16(case: :lower)
      |> binary_part(0, 8)

    Path.join(cache_dir(), "venv-ort-qnn-#{version}-#{hash}")
  end

  @spec qnn_lib_dir() :: {:ok, Path.t()} | {:error, String.t()}
  def qnn_lib_dir, do: lib_dir_of(venv_dir())

  @spec python() :: {:ok, Path.t()} | {:error, String.t()}
  def python do
    venv = venv_dir()

    with {:ok, _} <- lib_dir_of(venv), do: {:ok, Path.join(venv, "bin/python")}
  end

  defp lib_dir_of(venv) do
    found =
      Path.wildcard(Path.join(venv, "lib/python3*/site-packages/onnxruntime_qnn/libQnnHtp.so"))

    cond do
      not File.exists?(Path.join(venv, @marker)) ->
        {:error,
         "the compile venv #{venv} does not exist; create it with `mix hexagon_tpu.compile --setup`"}

      found == [] ->
        {:error, "the compile venv #{venv} has no onnxruntime_qnn/libQnnHtp.so"}

      true ->
        dir = found |> hd() |> Path.dirname()

        if File.exists?(Path.join(dir, "libQnnSystem.so")),
          do: {:ok, dir},
          else: {:error, "#{dir} has libQnnHtp.so but no libQnnSystem.so"}
    end
  end

  @spec setup(keyword()) :: {:ok, HexagonTpu.Compiler.setup_info()} | {:error, String.t()}
  def setup(opts \\ []) do
    progress = Keyword.get(opts, :progress, fn _ -> :ok end)
    venv = venv_dir()

    with {:error, _} <- lib_dir_of(venv),
         {:ok, python} <- system_python(),
         :ok <- create_venv(python, venv, progress) do
      setup_info(venv)
    else
      {:ok, _dir} -> setup_info(venv)
      {:error, _} = error -> error
    end
  end

  defp setup_info(venv) do
    with {:ok, dir} <- lib_dir_of(venv),
         do: {:ok, %{venv: venv, python: Path.join(venv, "bin/python"), qnn_lib_dir: dir}}
  end

  # The interpreter that creates the venv (also HexagonTpu.DeviceRuntime's, when it has pip).
  @spec system_python() :: {:ok, Path.t()} | {:error, String.t()}
  def system_python do
    case env("HEXAGON_TPU_PYTHON") do
      nil ->
        case System.find_executable("python3") do
          nil ->
            {:error,
             "python3 not found on the PATH: install it (Debian: apt-get install python3 " <>
               "python3-venv) or set HEXAGON_TPU_PYTHON"}

          path ->
            {:ok, path}
        end

      path ->
        if File.regular?(path) or System.find_executable(path),
          do: {:ok, System.find_executable(path) || path},
          else: {:error, "HEXAGON_TPU_PYTHON=#{path}: no such executable"}
    end
  end

  defp create_venv(python, venv, progress) do
    parent = Path.dirname(venv)
    tmp = Path.join(parent, ".#{Path.basename(venv)}.tmp-#{System.unique_integer([:positive])}")

    with :ok <- mkdir(parent),
         :ok <- progress.("creating #{venv} with #{python}"),
         :ok <- make_venv(python, tmp),
         :ok <- progress.("installing #{requirements()} (about 200 MB from PyPI)"),
         :ok <- pip_install(tmp),
         :ok <- File.cp(requirements(), Path.join(tmp, @marker)) |> posix("write a marker"),
         {:ok, _} <- lib_dir_of(tmp) do
      case File.rename(tmp, venv) do
        :ok ->
          :ok

        {:error, reason} ->
          # another process may have finished first: its venv is as good as ours
          File.rm_rf(tmp)

          case lib_dir_of(venv) do
            {:ok, _} ->
              :ok

            {:error, _} ->
              {:error, "cannot rename #{tmp} to #{venv}: #{:file.format_error(reason)}"}
          end
      end
    else
      {:error, _} = error ->
        File.rm_rf(tmp)
        error
    end
  end

  defp mkdir(dir) do
    case File.mkdir_p(dir) do
      :ok -> :ok
      {:error, reason} -> {:error, "cannot create #{dir}: #{:file.format_error(reason)}"}
    end
  end

  defp posix(:ok, _what), do: :ok

  defp posix({:error, reason}, what),
    do: {:error, "cannot #{what}: #{:file.format_error(reason)}"}

  defp make_venv(python, tmp) do
    case cmd(python, ["-m", "venv", tmp]) do
      {_, 0} ->
        :ok

      {output, status} ->
        if output =~ ~r/ensurepip|No module named venv|python3(\.\d+)?-venv/ do
          {:error,
           "#{python} has no working venv module: install it (Debian: apt-get install " <>
             "python3-venv), or point HEXAGON_TPU_PYTHON at a Python that has one"}
        else
          {:error, "`#{python} -m venv` failed (exit #{status}): #{last_line(output)}"}
        end
    end
  end

  defp pip_install(tmp) do
    args = ~w(-m pip install --disable-pip-version-check --no-input -r) ++ [requirements()]

    case cmd(Path.join(tmp, "bin/python"), args) do
      {_, 0} ->
        :ok

      {output, status} ->
        offline? =
          output =~
            ~r/NewConnectionError|Temporary failure in name resolution|Network is unreachable|Failed to establish a new connection|No matching distribution found|Could not find a version/

        if offline? do
          {:error,
           "pip could not download the pinned packages of #{requirements()} (offline, or PyPI " <>
             "unreachable, or no wheel for this Python/platform): #{pip_error(output)}"}
        else
          {:error,
           "pip install -r #{requirements()} failed (exit #{status}): #{pip_error(output)}"}
        end
    end
  end

  defp pip_error(output) do
    lines = String.split(output, "\n", trim: true)

    Enum.find(Enum.reverse(lines), List.last(lines) || "", &(&1 =~ ~r/^ERROR:/))
    |> String.trim()
  end

  @spec requirements() :: Path.t()
  def requirements do
    case env("HEXAGON_TPU_COMPILE_REQUIREMENTS") do
      nil -> Path.join(priv_dir(), @requirements)
      path -> Path.expand(path)
    end
  end

  # Runs `executable` with stderr in stdout; `{message, 127}` when it cannot be started.
  @spec cmd(Path.t(), [String.t()], [{String.t(), String.t()}]) :: {String.t(), integer()}
  def cmd(executable, args, env \\ []) do
    System.cmd(executable, args, stderr_to_stdout: true, env: env)
  rescue
    error in ErlangError -> {"cannot run #{executable}: #{inspect(error.original)}", 127}
  end

  # The last non-empty line of a command's output, for a one-line error.
  @spec last_line(String.t()) :: String.t()
  def last_line(output) do
    output |> String.split("\n", trim: true) |> List.last("") |> String.trim()
  end

  # The environment variable `name`, nil when unset or empty.
  @spec env(String.t()) :: String.t() | nil
  def env(name) do
    case System.get_env(name) do
      nil -> nil
      "" -> nil
      value -> value
    end
  end
end
