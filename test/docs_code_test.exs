defmodule HexagonTpu.DocsCodeTest do
  # The README's and the guides' ```elixir blocks, kept compiling where they can: each block
  # must parse (`Code.string_to_quoted/2`), and each call it makes to a fully qualified
  # `HexagonTpu...` function must name a function that exists (any arity from the call's own to
  # one more, for a pipe). An IEx session (lines starting with `iex>`) is checked by its
  # prompts' lines. A block that is a fragment by design (a `...` standing for code, a
  # keyword list on its own) is marked with the HTML comment `<!-- fragment -->` on the line
  # before its fence, and only counted.
  use ExUnit.Case, async: true

  @root Path.expand("..", __DIR__)
  @marker "<!-- fragment -->"

  @files ["README.md", "ARCHITECTURE.md"] ++
           Enum.map(
             Path.wildcard(Path.join(@root, "{guides,docs}/*.md")),
             &Path.relative_to(&1, @root)
           )

  for file <- Enum.sort(@files) do
    @file_name file
    test "the Elixir blocks of #{file} parse and call functions that exist" do
      path = Path.join(@root, @file_name)
      blocks = elixir_blocks(File.read!(path))

      for %{line: line, code: code, fragment?: false} <- blocks do
        location = "#{@file_name}:#{line}"

        case Code.string_to_quoted(code, file: @file_name, line: line + 1, columns: true) do
          {:ok, ast} ->
            for {module, fun, arity, call_line} <- remote_calls(ast),
                not exists?(module, fun, arity) do
              flunk(
                "#{@file_name}:#{call_line}: #{inspect(module)}.#{fun}/#{arity} does not exist " <>
                  "(the block at #{location})"
              )
            end

          {:error, {meta, message, token}} ->
            flunk(
              "#{location}: the block does not parse: #{@file_name}:#{meta[:line]}: " <>
                "#{inspect(message)} #{inspect(token)} (mark a fragment with #{@marker})"
            )
        end
      end
    end
  end

  test "fragments are marked on the line before the fence, and the marker is used" do
    for file <- @files do
      text = File.read!(Path.join(@root, file))

      # every marker is followed by an ```elixir fence
      for [after_marker] <-
            Regex.scan(~r/#{Regex.escape(@marker)}\n(.*)/, text, capture: :all_but_first) do
        assert after_marker == "```elixir", "#{file}: #{@marker} not before an ```elixir fence"
      end
    end
  end

  test "blocks are found: the README has Elixir blocks that parse" do
    blocks = elixir_blocks(File.read!(Path.join(@root, "README.md")))
    assert Enum.count(blocks, &(not &1.fragment?)) >= 2
  end

  # ```elixir blocks as %{line: fence line (1-based), code: text, fragment?: marked}.
  defp elixir_blocks(text) do
    lines = String.split(text, "\n")

    {blocks, _open, _previous} =
      lines
      |> Enum.with_index(1)
      |> Enum.reduce({[], nil, ""}, fn {line, n}, {blocks, open, previous} ->
        trimmed = String.trim(line)

        cond do
          open == nil and trimmed == "```elixir" ->
            {blocks, %{line: n, code: [], fragment?: String.trim(previous) == @marker}, line}

          open == nil ->
            {blocks, nil, line}

          trimmed == "```" ->
            block = %{open | code: open.code |> Enum.reverse() |> Enum.join("\n") |> iex_input()}
            {[block | blocks], nil, line}

          true ->
            {blocks, %{open | code: [line | open.code]}, line}
        end
      end)

    Enum.reverse(blocks)
  end

  # An IEx session's input: the lines after `iex>` and `...>` prompts; other code as it is.
  defp iex_input(code) do
    lines = String.split(code, "\n")

    if Enum.any?(lines, &String.starts_with?(String.trim_leading(&1), "iex>")) do
      Enum.map_join(lines, "\n", fn line ->
        case Regex.run(~r/^\s*(?:iex(?:\(\d+\))?|\.\.\.(?:\(\d+\))?)>\s?(.*)$/, line) do
          [_, input] -> input
          nil -> ""
        end
      end)
    else
      code
    end
  end

  # Every `HexagonTpu.X.fun(args)` call in the AST, written in full or through the block's
  # `alias HexagonTpu.X` and `alias HexagonTpu.{X, Y}`.
  defp remote_calls(ast) do
    aliases = aliases(ast)

    {_, calls} =
      Macro.prewalk(ast, [], fn
        {{:., _, [{:__aliases__, _, [head | tail]}, fun]}, meta, args} = node, acc
        when is_atom(fun) and fun != :{} and is_list(args) ->
          case Map.get(aliases, head, [head]) ++ tail do
            [:HexagonTpu | _] = parts ->
              {node, [{Module.concat(parts), fun, length(args), meta[:line]} | acc]}

            _ ->
              {node, acc}
          end

        node, acc ->
          {node, acc}
      end)

    Enum.reverse(calls)
  end

  defp aliases(ast) do
    {_, aliases} =
      Macro.prewalk(ast, %{}, fn
        {:alias, _, [{:__aliases__, _, parts}]} = node, acc ->
          {node, Map.put(acc, List.last(parts), parts)}

        {:alias, _, [{{:., _, [{:__aliases__, _, base}, :{}]}, _, names}]} = node, acc ->
          {node,
           Enum.reduce(names, acc, fn {:__aliases__, _, parts}, acc ->
             Map.put(acc, List.last(parts), base ++ parts)
           end)}

        node, acc ->
          {node, acc}
      end)

    aliases
  end

  defp exists?(module, fun, arity) do
    Code.ensure_loaded?(module) and
      Enum.any?([arity, arity + 1], &function_exported?(module, fun, &1))
  end
end
