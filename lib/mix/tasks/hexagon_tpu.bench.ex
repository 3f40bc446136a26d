defmodule Mix.Tasks.HexagonTpu.Bench do
  @shortdoc "Measures a model: latency, throughput, performance modes, host time, ops, memory"

  @moduledoc """
  Measures one model with `HexagonTpu.Bench.run/2` and prints its figures: a table, or JSON
  (the schema in [`docs/bench.md`](bench.md)).

      mix hexagon_tpu.bench MODEL.bin [options]

  Options (each `HexagonTpu.Bench.run/2`'s or `HexagonTpu.load_model/2`'s of the same name):

    * `--graph NAME`, `--lib PATH` (`lib_path:`), `--system-lib PATH` (`system_lib_path:`),
      `--async-queue-depth N`
    * `--iterations N`, `--warmup N`, `--in-flight 1,2,4`, `--throughput-executes N`
    * `--modes burst,balanced` (`none` skips them), `--mode-iterations N`, `--performance MODE`
    * `--profile detailed|optrace|none`, `--top-ops N`, `--seed N`
    * `--only latency,throughput,modes,profile`
    * `--format table|json` (default `table`), `--no-progress`

  On a board, without Mix, call `HexagonTpu.Bench.run/2` in IEx: this task is that call.
  """

  use Mix.Task

  @switches [
    graph: :string,
    lib: :string,
    system_lib: :string,
    async_queue_depth: :integer,
    iterations: :integer,
    warmup: :integer,
    in_flight: :string,
    throughput_executes: :integer,
    modes: :string,
    mode_iterations: :integer,
    performance: :string,
    profile: :string,
    top_ops: :integer,
    seed: :integer,
    only: :string,
    format: :string,
    progress: :boolean
  ]

  @usage "usage: mix hexagon_tpu.bench MODEL.bin [--iterations N] [--format table|json] ... " <>
           "(see mix help hexagon_tpu.bench)"

  @impl Mix.Task
  def run(argv) do
    {parsed, args, invalid} = OptionParser.parse(argv, strict: @switches)

    if invalid != [] or length(args) != 1 do
      details = Enum.map_join(invalid, ", ", fn {flag, _} -> flag end)
      Mix.raise(if(details == "", do: @usage, else: "invalid option #{details}; " <> @usage))
    end

    {format, parsed} = Keyword.pop(parsed, :format, "table")
    format = one_of!(format, ~w(table json), "--format")
    Mix.Task.run("app.config")

    case HexagonTpu.Bench.run(hd(args), options(parsed)) do
      {:ok, result} -> Mix.shell().info(HexagonTpu.Bench.format(result, format))
      {:error, error} -> Mix.raise(Exception.message(error))
    end
  end

  # argv's options as run/2's.
  defp options(parsed) do
    Enum.map(parsed, fn
      {:lib, path} ->
        {:lib_path, path}

      {:system_lib, path} ->
        {:system_lib_path, path}

      {:in_flight, list} ->
        {:in_flight, integers!(list, "--in-flight")}

      {:modes, "none"} ->
        {:modes, []}

      {:modes, list} ->
        {:modes, list |> split() |> Enum.map(&mode!/1)}

      {:performance, mode} ->
        {:performance, mode!(mode)}

      {:profile, "none"} ->
        {:profile, false}

      {:profile, level} ->
        {:profile, one_of!(level, ~w(detailed optrace), "--profile")}

      {:only, list} ->
        {:only,
         Enum.map(split(list), &one_of!(&1, ~w(latency throughput modes profile), "--only"))}

      other ->
        other
    end)
  end

  defp split(list), do: String.split(list, ",", trim: true)

  defp integers!(list, flag) do
    Enum.map(split(list), fn item ->
      case Integer.parse(item) do
        {n, ""} -> n
        _ -> Mix.raise("#{flag}: #{inspect(item)} is not an integer")
      end
    end)
  end

  defp mode!(name) do
    one_of!(
      name,
      Enum.map(HexagonTpu.Performance.modes(), &Atom.to_string/1),
      "a performance mode"
    )
  end

  defp one_of!(value, allowed, what) do
    if value in allowed,
      do: String.to_existing_atom(value),
      else: Mix.raise("#{what}: #{inspect(value)} is not one of #{Enum.join(allowed, ", ")}")
  end
end
