defmodule HexagonTpu.Stats.Ledger do
  @moduledoc false
  # The NIF's ledger of live objects read by creation site, and the text report of it
  # (`HexagonTpu.Stats.live_by_site/0`, `live_report/1`; the docs are there).

  alias HexagonTpu.{Args, Site, Stats, Text}

  @report_options Args.schema!(
                    top: [
                      type: :non_neg_integer,
                      default: 10,
                      type_doc: "a non-negative integer",
                      doc: "The number of sites listed one a line."
                    ]
                  )

  # The report's options, for HexagonTpu.Stats.live_report/1's docs.
  @spec report_options() :: NimbleOptions.t()
  def report_options, do: @report_options

  @spec by_site() :: [Stats.site_count()]
  def by_site, do: by_site(Stats.live())

  # Live entries counted by {site, kind}, largest count first.
  @spec by_site([Stats.live_entry()]) :: [Stats.site_count()]
  def by_site(entries) do
    entries
    |> Enum.frequencies_by(&{&1.site, &1.kind})
    |> Enum.map(fn {{site, kind}, count} -> {site, kind, count} end)
    |> Enum.sort_by(fn {site, kind, count} -> {-count, site, kind} end)
  end

  # A runtime HexagonTpu.load_model/2 keeps for reuse (not a leak).
  @spec shared_runtime?(Stats.live_entry()) :: boolean()
  def shared_runtime?(entry), do: entry.kind == :runtime and Site.shared_runtime?(entry.site)

  @spec report(keyword()) :: String.t()
  def report(opts \\ []) do
    fun = "HexagonTpu.Stats.live_report/1"
    opts = Args.options!(opts, @report_options, fun)
    format_report(Stats.live(), opts[:top])
  end

  # The report of `entries` (live/0's), `top` sites one a line.
  @spec format_report([Stats.live_entry()], non_neg_integer()) :: String.t()
  def format_report(entries, top) do
    sites =
      entries
      |> Enum.group_by(& &1.site)
      |> Enum.sort_by(fn {site, group} -> {-sum_bytes(group), -length(group), site} end)

    {shown, folded} = Enum.split(sites, top)

    files =
      entries
      |> Enum.group_by(&site_file(&1.site))
      |> Enum.sort_by(fn {file, group} -> {-sum_bytes(group), -length(group), file} end)

    width =
      [sum_bytes(entries) | Enum.map(files, fn {_, group} -> sum_bytes(group) end)]
      |> Enum.map(&String.length(Text.thousands(&1)))
      |> Enum.max()

    amount = fn bytes -> String.pad_leading(Text.thousands(bytes), width) <> " bytes" end

    site_lines =
      Enum.map(shown, fn {site, group} ->
        parts =
          case held_parts(group) do
            [] ->
              ""

            parts ->
              "  [" <>
                Enum.map_join(parts, ", ", fn {p, n} -> "#{p} #{Text.thousands(n)}" end) <> "]"
          end

        "  #{amount.(sum_bytes(group))}  #{kinds(group)}  #{site}#{parts}"
      end)

    folded_line =
      case folded do
        [] ->
          []

        folded ->
          group = Enum.flat_map(folded, &elem(&1, 1))
          n = length(folded)
          ["  #{amount.(sum_bytes(group))}  #{kinds(group)} in #{n} more #{plural(n, "site")}"]
      end

    file_lines =
      Enum.map(files, fn {file, group} ->
        "  #{amount.(sum_bytes(group))}  #{file} (#{length(group)} #{plural(length(group), "object")})"
      end)

    header =
      "hexagon_tpu: #{if entries == [], do: "no objects", else: kinds(entries)} alive; " <>
        "#{Text.thousands(sum_bytes(entries))} bytes held"

    if entries == [] do
      header
    else
      Enum.join(
        [header, "by creation site, largest first:"] ++
          site_lines ++ folded_line ++ ["by file:"] ++ file_lines,
        "\n"
      )
    end
  end

  defp sum_bytes(entries), do: entries |> Enum.map(& &1.bytes) |> Enum.sum()

  # The parts of a group's bytes, in the order they first appear.
  defp held_parts(entries) do
    entries
    |> Enum.flat_map(& &1.held)
    |> Enum.reduce([], fn {part, n}, acc ->
      case List.keyfind(acc, part, 0) do
        nil -> acc ++ [{part, n}]
        {^part, sum} -> List.keystore(acc, part, 0, {part, sum + n})
      end
    end)
  end

  defp kinds(entries) do
    counts = Enum.frequencies_by(entries, & &1.kind)

    [:runtime, :context, :graph]
    |> Enum.filter(&Map.has_key?(counts, &1))
    |> Enum.map_join(", ", fn kind ->
      n = counts[kind]
      "#{n} #{plural(n, Atom.to_string(kind))}"
    end)
  end

  defp plural(1, word), do: word
  defp plural(_, word), do: word <> "s"

  @doc false
  # The source file of a ledger site.
  @spec site_file(String.t()) :: String.t()
  def site_file(site) do
    cond do
      match = Regex.run(~r/\(([^()]+?)(?::\d+)?\)$/, site) -> Enum.at(match, 1)
      match = Regex.run(~r/^(.+):\d+$/, site) -> Enum.at(match, 1)
      true -> site
    end
  end
end
