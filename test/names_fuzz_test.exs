defmodule HexagonTpu.NamesFuzzTest do
  # The `.names` sidecar parser (HexagonTpu.Context.parse_names/2) under a coverage-guided
  # mutation loop: libFuzzer cannot drive Elixir, so Erlang's :cover counts the lines of
  # HexagonTpu.Context each input runs, and an input that reaches a line none before it did is
  # kept for further mutation (docs/fuzzing.md). Seeds: native/hexagon_tpu_nif/fuzz/corpus/names.
  # A fixed seed and a short budget here; HEXAGON_TPU_NAMES_FUZZ_RUNS=N runs longer (by hand).
  #
  # Property: a parse succeeds with names that round-trip (written back the way the compile task
  # writes them, `priv/compile/hexagon_tpu_names.py`'s write_names, they parse to the same), or
  # fails with a %HexagonTpu.Error{} naming a line of the input; never a crash of another kind.
  use ExUnit.Case, async: false

  alias HexagonTpu.{Context, Error}

  @seeds Path.expand("../native/hexagon_tpu_nif/fuzz/corpus/names", __DIR__)
  @file_name "model.bin.names"
  # Tokens the format gives meaning to, and bytes that are not UTF-8.
  @dictionary [
    " ",
    "\n",
    "\t",
    "\r",
    "#",
    "%",
    "%2",
    "%41",
    "%ZZ",
    "%C3%A9",
    "%E2%80%A8",
    "%ff",
    "input",
    "output",
    "0",
    "7",
    "-1",
    "+1",
    "1_0",
    "é",
    "\u2028",
    "\u00a0",
    <<0xFF>>,
    <<0xC3>>,
    "first",
    "a",
    "b"
  ]

  @tag timeout: :infinity
  test "the .names parser: a parse round-trips or names the line it refuses" do
    runs = String.to_integer(System.get_env("HEXAGON_TPU_NAMES_FUZZ_RUNS", "5000"))
    :rand.seed(:exsss, {23, 3, 2026})
    seeds = for f <- Path.wildcard(Path.join(@seeds, "*")), do: File.read!(f)
    assert length(seeds) >= 3

    {:ok, _} = :cover.start()

    try do
      {:ok, Context} = :cover.compile_beam(Context)

      {queue, seen} =
        Enum.reduce(seeds, {[], MapSet.new()}, fn s, {q, seen} ->
          {_, seen} = run(s, seen)
          {[s | q], seen}
        end)

      {_queue, seen, kept} =
        Enum.reduce(1..runs, {queue, seen, 0}, fn _, {queue, seen, kept} ->
          input = mutate(Enum.random(queue), Enum.random(queue))

          case run(input, seen) do
            {true, seen} -> {[input | queue], seen, kept + 1}
            {false, seen} -> {queue, seen, kept}
          end
        end)

      IO.puts(
        "\n.names fuzz: #{runs} runs, #{MapSet.size(seen)} lines of HexagonTpu.Context " <>
          "reached, #{kept} inputs kept past the #{length(seeds)} seeds"
      )

      # Coverage guided the loop: some mutant reached a line no seed did.
      assert kept > 0
    after
      :cover.stop()
      # :cover.stop/0 unloads the instrumented module; load the compiled one back.
      :code.purge(Context)
      {:module, Context} = :code.load_file(Context)
    end
  end

  # Checks the property on `input`; whether it reached a line not in `seen`, and the new set.
  defp run(input, seen) do
    :ok = :cover.reset(Context)
    check(input)
    {:ok, lines} = :cover.analyse(Context, :calls, :line)
    hit = for {{Context, line}, calls} <- lines, calls > 0, into: MapSet.new(), do: line
    new? = not MapSet.subset?(hit, seen)
    {new?, MapSet.union(seen, hit)}
  end

  defp check(input) do
    case Context.parse_names(input, @file_name) do
      {:ok, {names, tensors}} ->
        again = Context.parse_names(write(names, tensors), @file_name)

        assert {:ok, {^names, tensors2}} = again, """
        #{inspect(input)} parsed, but its names written back do not: #{inspect(again)}
        """

        assert strip(tensors2) == strip(tensors), inspect(input)

      {:error, %Error{reason: :invalid_model, message: message}} ->
        lines = input |> String.split("\n") |> length()
        assert message =~ @file_name, message
        assert [_, n] = Regex.run(~r/: line (\d+) /, message), message
        assert String.to_integer(n) in 1..lines, message

      other ->
        flunk("#{inspect(input)}: neither parsed nor refused: #{inspect(other)}")
    end
  end

  # The tensor lines without their line numbers, in input order.
  defp strip(tensors),
    do: tensors |> Enum.map(fn {key, name, _line} -> {key, name} end) |> Enum.reverse()

  # The file as the compile task writes it: graph lines, then tensor lines with '%', '#' and
  # whitespace percent-encoded (Python's `re.sub(r"[%#\s]", ...)` in names_token).
  defp write(names, tensors) do
    graphs = for {qnn, name} <- names, do: "#{name} #{qnn}\n"

    lines =
      for {{graph, kind, index}, name, _} <- Enum.reverse(tensors),
          do: "#{graph} #{kind} #{index} #{encode(name)}\n"

    IO.iodata_to_binary(["# names\n", graphs, lines])
  end

  defp encode(name) do
    Regex.replace(~r/[%#\s]/u, name, fn c ->
      for <<b <- c>>, into: "", do: "%" <> Base.encode16(<<b>>)
    end)
  end

  # One of: insert a dictionary token or a random byte, delete a span, duplicate a line,
  # splice two inputs at line boundaries.
  defp mutate(a, b) do
    case :rand.uniform(5) do
      1 -> insert(a, Enum.random(@dictionary))
      2 -> insert(a, <<:rand.uniform(256) - 1>>)
      3 -> delete(a)
      4 -> duplicate_line(a)
      5 -> splice(a, b)
    end
  end

  defp at(s), do: :rand.uniform(byte_size(s) + 1) - 1

  defp insert(s, token) do
    i = at(s)
    binary_part(s, 0, i) <> token <> binary_part(s, i, byte_size(s) - i)
  end

  defp delete(""), do: ""

  defp delete(s) do
    i = at(s) |> min(byte_size(s) - 1)
    n = min(:rand.uniform(8), byte_size(s) - i)
    binary_part(s, 0, i) <> binary_part(s, i + n, byte_size(s) - i - n)
  end

  defp duplicate_line(s) do
    lines = String.split(s, "\n")
    i = :rand.uniform(length(lines)) - 1
    lines |> List.insert_at(i, Enum.at(lines, i)) |> Enum.join("\n")
  end

  defp splice(a, b) do
    la = String.split(a, "\n")
    lb = String.split(b, "\n")

    Enum.join(
      Enum.take(la, :rand.uniform(length(la))) ++ Enum.drop(lb, :rand.uniform(length(lb)) - 1),
      "\n"
    )
  end
end
