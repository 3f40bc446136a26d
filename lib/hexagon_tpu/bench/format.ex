defmodule HexagonTpu.Bench.Format do
  @moduledoc false
  # A benchmark's figures as text (HexagonTpu.Bench.format/2): the table for people, one
  # section per measurement, and the JSON document whose schema docs/bench.md gives (the
  # struct's keys, plus `schema`).

  alias HexagonTpu.{Bench, Text}

  @schema "hexagon_tpu.bench/1"

  @doc "The schema's name and version, the JSON document's `schema`."
  @spec schema() :: String.t()
  def schema, do: @schema

  @spec json(Bench.t()) :: String.t()
  def json(result) do
    result
    |> Map.from_struct()
    |> Map.put(:schema, @schema)
    |> HexagonTpu.JSON.encode()
  end

  @spec table(Bench.t()) :: String.t()
  def table(r) do
    [
      header(r),
      load(r),
      latency(r),
      host(r),
      throughput(r),
      modes(r),
      profile(r),
      memory(r),
      "executes: #{r.executes.total} made, #{r.executes.counted} counted by the package"
    ]
    |> Enum.reject(&is_nil/1)
    |> Enum.join("\n\n")
  end

  defp header(r) do
    m = r.model
    where = if m.path, do: " (#{m.path})", else: ""
    inputs = if r.settings.inputs == :random, do: "random, seed #{r.settings.seed}", else: "given"

    lines =
      [["backend", m.backend]] ++
        Enum.map(m.inputs, &["input", tensor(&1, "quantized from f32 on the host")]) ++
        [["inputs", inputs]] ++
        Enum.map(m.outputs, &["output", tensor(&1, "dequantized to f32 on the host")]) ++
        [["performance", inspect(r.settings.performance || :runtime)]]

    section(
      "hexagon_tpu.bench: graph #{inspect(m.graph)}#{where}",
      columns(lines, [:left, :left])
    )
  end

  defp tensor(t, converted) do
    dims = Enum.map_join(t.shape, &"[#{&1}]")
    "#{t.name} #{t.type}#{dims}" <> if(t.form == :f32, do: " (#{converted})", else: "")
  end

  defp load(r) do
    rows =
      if(r.load_us, do: [["load", us(r.load_us)]], else: []) ++
        [["first execute", us(r.first_execute_us)]]

    section("load and first execute (us)", columns(rows, [:left, :right]))
  end

  defp latency(%{latency: nil}), do: nil

  defp latency(%{latency: l, settings: s}) do
    keys = [:min_us, :mean_us, :p50_us, :p90_us, :p99_us, :max_us]
    head = ["min", "mean", "p50", "p90", "p99", "max"]

    section(
      "latency (us; #{l.iterations} executes after #{s.warmup} warm-up)",
      columns([head, Enum.map(keys, &us(Map.fetch!(l, &1)))], List.duplicate(:right, 6))
    )
  end

  defp host(%{host: nil}), do: nil

  defp host(%{host: h}) do
    share = fn value -> percent(value, h.call_us) end

    rows = [
      ["the whole call", us(h.call_us), "100.0%"],
      ["graphExecute (QNN)", us(h.graph_execute_us), share.(h.graph_execute_us)],
      ["quantize (inputs)", us(h.quantize_us), share.(h.quantize_us)],
      ["dequantize (outputs)", us(h.dequantize_us), share.(h.dequantize_us)],
      ["the rest (checks, scheduling, NIF, reply)", us(h.other_us), share.(h.other_us)]
    ]

    exclusive =
      if h.exclusive,
        do: "",
        else: "; NOT exclusive: the counters saw #{h.executes} executes, other work ran meanwhile"

    section(
      "host and QNN (us per execute, over the latency executes; " <>
        "#{num(h.tensors_converted)} tensors converted per execute#{exclusive})",
      columns(rows, [:left, :right, :right])
    )
  end

  defp throughput(%{throughput: nil}), do: nil

  defp throughput(%{throughput: levels}) do
    rows =
      [["in flight", "executes", "elapsed (us)", "executes/s"]] ++
        Enum.map(levels, fn t ->
          [
            Integer.to_string(t.in_flight),
            Integer.to_string(t.executes),
            us(t.elapsed_us),
            num(t.executes_per_s)
          ]
        end)

    section("throughput (execute_async/3)", columns(rows, [:right, :right, :right, :right]))
  end

  defp modes(%{modes: nil}), do: nil

  defp modes(%{modes: modes}) do
    rows =
      [["mode", "p50 (us)", "votes", "refused"]] ++
        Enum.map(modes, fn m ->
          [
            inspect(m.mode),
            us(m.p50_us),
            Integer.to_string(m.votes),
            Integer.to_string(m.votes_refused)
          ]
        end)

    n = hd(modes).iterations

    section(
      "performance modes (#{n} executes each)",
      columns(rows, [:left, :right, :right, :right])
    )
  end

  defp profile(%{profile: nil}), do: nil

  defp profile(%{profile: p}) do
    totals =
      "execute #{opt(p.execute_us)} us, accelerator #{opt(p.accelerator_us)} us / " <>
        "#{opt(p.accelerator_cycles)} cycles; #{p.ops} ops"

    rows =
      [["op", "cycles", "us", "share"]] ++
        Enum.map(p.top_ops, fn op ->
          [op.name, opt(op.cycles), opt(op.us), if(op.share, do: percent(op.share, 1), else: "-")]
        end)

    body =
      if p.top_ops == [],
        do: [totals],
        else: [totals | columns(rows, [:left, :right, :right, :right])]

    section("profile (#{p.level}, one execute; the top #{length(p.top_ops)} ops)", body)
  end

  defp memory(%{memory: m}) do
    rows = [
      [
        "ledger (bytes)",
        bytes(m.ledger_bytes_before),
        bytes(m.ledger_bytes_model),
        bytes(m.ledger_bytes_after)
      ],
      [
        "RSS (bytes)",
        bytes(m.rss_before_bytes),
        bytes(m.rss_loaded_bytes),
        bytes(m.rss_after_bytes)
      ]
    ]

    change =
      if m.rss_change_bytes,
        do: "; RSS change over the run: #{signed(m.rss_change_bytes)} bytes",
        else: ""

    section(
      "memory#{change}",
      columns([["", "before", "model", "after"] | rows], [:left, :right, :right, :right])
    )
  end

  # --- layout

  defp section(title, lines), do: Enum.join([title | Enum.map(lines, &("  " <> &1))], "\n")

  # Rows of cells as aligned lines: each column as wide as its widest cell.
  defp columns(rows, aligns) do
    widths =
      rows
      |> Enum.zip_with(& &1)
      |> Enum.map(fn column -> column |> Enum.map(&String.length/1) |> Enum.max() end)

    Enum.map(rows, fn row ->
      [row, widths, aligns]
      |> Enum.zip_with(fn
        [cell, width, :left] -> String.pad_trailing(cell, width)
        [cell, width, :right] -> String.pad_leading(cell, width)
      end)
      |> Enum.join("  ")
      |> String.trim_trailing()
    end)
  end

  defp us(value) when is_float(value) and value >= 100, do: Text.thousands(round(value))
  defp us(value) when is_number(value), do: :erlang.float_to_binary(value / 1, decimals: 1)

  defp num(value) when is_float(value) and value >= 100, do: Text.thousands(round(value))
  defp num(value), do: :erlang.float_to_binary(value / 1, decimals: 2)

  defp opt(nil), do: "-"
  defp opt(n) when is_integer(n), do: Text.thousands(n)

  defp bytes(nil), do: "-"
  defp bytes(n), do: Text.thousands(n)

  defp signed(n) when n >= 0, do: "+" <> Text.thousands(n)
  defp signed(n), do: "-" <> Text.thousands(-n)

  defp percent(_part, whole) when whole == 0, do: "-"
  defp percent(part, whole), do: :erlang.float_to_binary(100 * part / whole, decimals: 1) <> "%"
end
