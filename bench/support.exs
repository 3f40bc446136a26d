defmodule HexagonTpu.BenchSupport do
  @moduledoc false
  # What the bench scripts share (each loads it: `Code.require_file("support.exs", __DIR__)`):
  # a median, a timing of a function, a qnn_sim model built from its JSON spec, the QNN venv's
  # Python and the cache's OpenCV.

  @doc "The median of a non-empty list (the upper one of an even count)."
  def median(values) do
    sorted = Enum.sort(values)
    Enum.at(sorted, div(length(sorted), 2))
  end

  @doc "`fun` once to warm up, then `runs` times: the median of its times in ms."
  def time_ms(fun, runs) do
    _ = fun.()
    median(for _ <- 1..runs, do: elem(:timer.tc(fun), 0) / 1000)
  end

  @doc """
  The qnn_sim context binary `dir/name.bin` of the JSON model `spec`, made by qnn_sim's builder
  (`qnn-sim-build`, at `builder`); returns its path.
  """
  def sim_model!(builder, dir, name, spec) do
    json = Path.join(dir, "#{name}.json")
    bin = Path.join(dir, "#{name}.bin")
    File.write!(json, spec)
    {_, 0} = System.cmd(builder, [json, "-o", bin])
    bin
  end

  @doc "The QNN venv's Python (`HexagonTpu.Compiler.python/0`), or nil where it is not set up."
  def python do
    case HexagonTpu.Compiler.python() do
      {:ok, python} -> python
      {:error, _} -> nil
    end
  end

  @doc """
  The site directory of the opencv-python-headless that test/support/real_models.py installs
  into the cache (with `python`), or `{:error, output}` when it cannot be set up.
  """
  def opencv_site(python) do
    script = Path.expand("../test/support/real_models.py", __DIR__)
    cache = HexagonTpu.Compiler.cache_dir()

    case System.cmd(python, [script, "setup", "--cache", cache], stderr_to_stdout: true) do
      {out, 0} -> {:ok, Path.join(List.last(Regex.run(~r/^dir: (.+)$/m, out)), "site")}
      {out, _} -> {:error, String.trim(out)}
    end
  end
end
