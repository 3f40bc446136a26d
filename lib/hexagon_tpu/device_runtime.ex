defmodule HexagonTpu.DeviceRuntime do
  @moduledoc """
  Installs the device half of the compile task's pin: Qualcomm's QNN runtime for the board,
  from the aarch64 wheel of the same `onnxruntime-qnn` that `mix hexagon_tpu.compile` uses,
  laid out for a Nerves `rootfs_overlay`. The engine of `mix hexagon_tpu.runtime`.

  A context binary loads only on a runtime of the same QAIRT version or a newer one (see
  [docs/models.md](models.md), "The version rule"). With this overlay in the firmware, the binaries the
  compile task makes match the device's runtime by construction.

      {:ok, info} = HexagonTpu.DeviceRuntime.install("rootfs_overlay")
      info.build_id
      #=> "v2.51.0.260929181845"

  It writes, under the directory given:

      usr/lib/libQnnHtp.so                   the HTP backend (what HexagonTpu.Runtime opens)
      usr/lib/libQnnSystem.so                QnnSystem (context binary metadata)
      usr/lib/libQnnHtpV68Stub.so            the CPU side of the DSP session, per HTP arch
      usr/lib/dsp/libQnnHtpV68Skel.so        the DSP side, per HTP arch
      usr/share/doc/qairt/Qualcomm_LICENSE.pdf

  The wheel and its sha256 are pinned in `priv/compile/requirements.txt` (the line
  `# device-runtime: <wheel> sha256=<hex>`, beside the compiler's `onnxruntime-qnn==` pin: one
  owner for both sides). The wheel is downloaded once into `<cache>/wheels` (the cache folder of
  `HexagonTpu.Compiler`) and checked against that sha256 before every use; the build id is read
  from the installed `libQnnHtp.so` (its stub and skel must carry the same one).

  The libraries are Qualcomm's, under the license inside the wheel (installed beside them).
  This package does not ship them: they are downloaded from PyPI on your machine, and whoever
  puts them into a firmware image does so under that license.

  The download runs in Python (`priv/compile/hexagon_tpu_runtime.py`, standard library and
  pip): the compile venv's interpreter if the venv exists, else `$HEXAGON_TPU_PYTHON` or
  `python3` when it has pip, else the compile venv is created first.

  Errors are `{:error, message}`: one line.
  """

  alias HexagonTpu.Python

  @script "hexagon_tpu_runtime.py"
  # The script runs on the standard library (or pip) alone: no user site-packages.
  @env [{"PYTHONNOUSERSITE", "1"}]

  @type info :: %{
          into: Path.t(),
          build_id: String.t(),
          wheel: String.t(),
          files: [Path.t()]
        }

  @doc """
  Installs the device runtime into `dir` (created if missing; files already there are replaced).

  Options: `:htp_arch` (an integer or a list; default 68, the QCS6490's: which stubs and skels
  to install), `:progress` (a function given each progress message).
  """
  @spec install(Path.t(), keyword()) :: {:ok, info()} | {:error, String.t()}
  def install(dir, opts \\ []) do
    opts = Keyword.validate!(opts, htp_arch: 68, progress: fn _ -> :ok end)
    archs = List.wrap(opts[:htp_arch])
    dir = Path.expand(dir)

    with :ok <- check_archs(archs),
         :ok <- check_dir(dir),
         {:ok, python} <- python(opts[:progress]) do
      args =
        [Path.join(Python.priv_dir(), @script), "overlay", "--into", dir] ++
          Enum.flat_map(archs, &["--htp-arch", to_string(&1)]) ++
          ["--requirements", Python.requirements(), "--cache", Python.cache_dir()]

      with {:ok, out} <- run(python, args, opts[:progress]) do
        {:ok,
         %{
           into: dir,
           build_id: value(out, "build_id"),
           wheel: value(out, "wheel"),
           files: for("file: " <> file <- out, do: file)
         }}
      end
    end
  end

  defp check_archs([]), do: {:error, "no HTP architecture given"}

  defp check_archs(archs) do
    case Enum.reject(archs, &(is_integer(&1) and &1 > 0)) do
      [] -> :ok
      [bad | _] -> {:error, "invalid htp_arch #{inspect(bad)}: expected a positive integer"}
    end
  end

  defp check_dir(dir) do
    if File.exists?(dir) and not File.dir?(dir),
      do: {:error, "#{dir} is not a directory"},
      else: :ok
  end

  # The interpreter that runs the script: it needs pip, nothing else.
  defp python(progress) do
    case Python.python() do
      {:ok, python} ->
        {:ok, python}

      {:error, _} ->
        with {:ok, python} <- Python.system_python() do
          if match?({_, 0}, Python.cmd(python, ["-m", "pip", "--version"], @env)) do
            {:ok, python}
          else
            with {:ok, setup} <- Python.setup(progress: progress), do: {:ok, setup.python}
          end
        end
    end
  end

  defp run(python, args, progress) do
    {output, status} = Python.cmd(python, args, @env)
    lines = String.split(output, "\n", trim: true)
    for "hexagon_tpu_runtime: info: " <> message <- lines, do: progress.(message)
    errors = for "hexagon_tpu_runtime: error: " <> message <- lines, do: message

    case {status, errors} do
      {0, _} -> {:ok, lines}
      {_, [_ | _]} -> {:error, List.last(errors)}
      {status, []} -> {:error, "#{@script} exited with status #{status}: #{List.last(lines)}"}
    end
  end

  defp value(lines, key) do
    Enum.find_value(lines, fn line ->
      case String.split(line, ": ", parts: 2) do
        [^key, value] -> value
        _ -> nil
      end
    end)
  end
end
