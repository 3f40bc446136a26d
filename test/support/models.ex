defmodule HexagonTpu.Test.Models do
  @moduledoc false
  # Small models for qnn_sim, written as the JSON specs its builder CLI reads
  # (native/hexagon_tpu_nif/qnn_sim/README.md) and built into context binaries on demand.

  alias HexagonTpu.JSON
  alias HexagonTpu.Test.Support

  @doc """
  A tensor: QNN dtype name (`:ufixed_point_8`, `:float_32`, ...), dims and quantization in
  QNN's convention: `{:per_tensor, scale, offset}` or `{:per_axis, axis, scales, offsets}`.
  """
  def t(dtype, dims, quant \\ :none) do
    base = %{dtype: Atom.to_string(dtype), shape: dims}

    case quant do
      :none ->
        base

      {:per_tensor, scale, offset} ->
        Map.put(base, :quant, %{scale: scale, offset: offset})

      {:per_axis, axis, scales, offsets} ->
        Map.put(base, :quant, %{axis: axis, scales: scales, offsets: offsets})
    end
  end

  @doc "x -> identity -> y. Options: `:name` (graph name) and the behaviour options of `model/2`."
  def identity(x, y, opts \\ []) do
    graph = %{
      name: Keyword.get(opts, :name, "identity"),
      inputs: [Map.put(x, :name, "x")],
      nodes: [%{op: "identity", inputs: ["x"], output: Map.put(y, :name, "y")}],
      outputs: ["y"]
    }

    model([graph], opts)
  end

  @doc "a + b -> sum."
  def add(a, b, out, opts \\ []) do
    graph = %{
      name: Keyword.get(opts, :name, "add"),
      inputs: [Map.put(a, :name, "a"), Map.put(b, :name, "b")],
      nodes: [%{op: "add", inputs: ["a", "b"], output: Map.put(out, :name, "sum")}],
      outputs: ["sum"]
    }

    model([graph], opts)
  end

  @doc "Two identity graphs, `first` and `second`, in one context."
  def two_graphs(t) do
    graphs =
      for name <- ["first", "second"] do
        %{
          name: name,
          inputs: [Map.put(t, :name, "x")],
          nodes: [%{op: "identity", inputs: ["x"], output: Map.put(t, :name, "y")}],
          outputs: ["y"]
        }
      end

    model(graphs, [])
  end

  @doc """
  A small quantized classifier: u8 [1, 4] (scale 1/255) -> fully connected with per-channel
  s8 weights [3, 4] and s32 bias -> u8 logits (scale 4/255, zero point 128) -> softmax (f32),
  unless `softmax: false`.
  """
  def classifier(w_scales, w_values, b_values, opts \\ []) do
    classes = length(w_scales)
    features = div(length(w_values), classes)

    fc = %{
      op: "fully_connected",
      inputs: ["x", "w", "b"],
      output:
        %{name: "logits"}
        |> Map.merge(t(:ufixed_point_8, [1, classes], {:per_tensor, 4 / 255, -128}))
    }

    softmax = %{
      op: "softmax",
      inputs: ["logits"],
      output: Map.merge(%{name: "probs"}, t(:float_32, [1, classes]))
    }

    softmax? = Keyword.get(opts, :softmax, true)

    graph = %{
      name: Keyword.get(opts, :name, "classifier"),
      inputs: [
        Map.merge(%{name: "x"}, t(:ufixed_point_8, [1, features], {:per_tensor, 1 / 255, 0}))
      ],
      constants: [
        %{name: "w", values: w_values}
        |> Map.merge(
          t(:sfixed_point_8, [classes, features], {:per_axis, 0, w_scales, zeros(classes)})
        ),
        %{name: "b", values: b_values}
        |> Map.merge(
          t(
            :sfixed_point_32,
            [classes],
            {:per_axis, 0, Enum.map(w_scales, &(&1 / 255)), zeros(classes)}
          )
        )
      ],
      nodes: if(softmax?, do: [fc, softmax], else: [fc]),
      outputs: [if(softmax?, do: "probs", else: "logits")]
    }

    model([graph], opts)
  end

  defp zeros(n), do: List.duplicate(0, n)

  @doc """
  A spec from graphs and behaviour options: `sleep_ms:`, `fail_execute:` /
  `fail_context_create:` (`{code, :once | :always | {:after, n}}`, counted per context),
  `adversarial:` (a list of names).
  """
  def model(graphs, opts) do
    behaviour =
      %{}
      |> put_if(:sleep_ms, opts[:sleep_ms])
      |> put_if(:fail_execute, fault(opts[:fail_execute]))
      |> put_if(:fail_context_create, fault(opts[:fail_context_create]))
      |> put_if(:adversarial, opts[:adversarial])

    if behaviour == %{}, do: %{graphs: graphs}, else: %{graphs: graphs, behaviour: behaviour}
  end

  defp fault(nil), do: nil
  defp fault({code, :once}), do: %{code: code, mode: "once", scope: "context"}
  defp fault({code, :always}), do: %{code: code, scope: "context"}
  defp fault({code, {:after, n}}), do: %{code: code, after: n, scope: "context"}

  defp put_if(map, _key, nil), do: map
  defp put_if(map, key, value), do: Map.put(map, key, value)

  @doc "The directory built models go to (emptied by test_helper.exs at the start of a run)."
  def dir, do: Path.join(Mix.Project.build_path(), "test_models")

  @doc "Builds a spec into a context binary (cached by content for this run); returns its path."
  def build!(spec) do
    json = JSON.encode(spec)
    hash = json |> :erlang.md5() |> Base.url_encode64(padding: false)
    path = Path.join(dir(), "#{hash}.bin")

    unless File.exists?(path) do
      File.mkdir_p!(dir())
      spec_path = Path.join(dir(), "#{hash}.#{System.unique_integer([:positive])}.json")
      tmp = spec_path <> ".bin"
      File.write!(spec_path, json)

      case System.cmd(Support.builder(), [spec_path, "-o", tmp], stderr_to_stdout: true) do
        {_, 0} -> File.rename!(tmp, path)
        {output, status} -> raise "qnn-sim-build failed (#{status}): #{output}\nspec: #{json}"
      end

      File.rm(spec_path)
    end

    path
  end
end
