defmodule HexagonTpu.Graph.Inputs do
  @moduledoc false
  # An execute's inputs (HexagonTpu.Graph, "Inputs and outputs"): ordered in the graph's input
  # order from a list or a map by name, then each turned into the bytes the NIF takes and their
  # mode, `:model` (the model's own type, passed to QNN untouched), `:f32` (converted by the
  # NIF with the tensor's parameters) or `:frame` (a Preprocess.Frame's bytes, preprocessed by
  # the NIF into the input's buffer with the pass in `frames`, one per frame input in order).
  # mode/2 is the one rule for the first two, for inputs and outputs. Byte sizes are the NIF's
  # to check (qnn::io), against the form the mode says.

  alias HexagonTpu.{Args, Error, Graph, Optional, TensorInfo}
  alias HexagonTpu.Preprocess.Frame

  @frame_fields [:name, :shape, :type, :quantization]

  @doc false
  # `:f32` when f32 data for `info` is converted (the option is `:auto`, the tensor has an f32
  # conversion and is not f32 itself), `:model` otherwise.
  @spec mode(TensorInfo.t(), :auto | :none) :: :model | :f32
  def mode(info, conversion) do
    if conversion == :auto and info.f32_conversion and info.type != {:f, 32},
      do: :f32,
      else: :model
  end

  @doc false
  # The inputs as a list in the graph's order, from a list or a map by name.
  @spec order(Graph.t(), term()) :: {:ok, list()} | {:error, Error.t()}
  def order(graph, inputs) when is_list(inputs) do
    if proper_length(inputs),
      do: {:ok, inputs},
      else:
        Args.invalid_input(
          "graph `#{graph.name}`: inputs must be a proper list, given #{Args.quote_input(inputs)}"
        )
  end

  def order(graph, inputs) when is_map(inputs) and not is_struct(inputs) do
    with {:ok, by_name} <- by_name(graph, inputs) do
      order_by_name(graph, by_name)
    end
  end

  def order(graph, other) do
    Args.invalid_input(
      "graph `#{graph.name}`: inputs must be a list (in input order) or a map by input name, " <>
        "given #{Args.quote_input(other)}"
    )
  end

  @doc false
  # The ordered inputs as binaries, their modes per `quantize`, and the passes of the frames.
  @spec prepare(Graph.t(), list(), :auto | :none) ::
          {:ok, [binary()], [:model | :f32 | :frame], [map()]} | {:error, Error.t()}
  # The count is the NIF's to check (qnn::io names the graph's inputs in its message, and the
  # NIF checks the graph's handle first): a list of another length goes on as placeholders,
  # unprepared, for it to report.
  def prepare(graph, values, _quantize) when length(values) != length(graph.inputs),
    do: {:ok, Enum.map(values, fn _ -> "" end), [], []}

  def prepare(graph, values, quantize) do
    graph.inputs
    |> Enum.zip(values)
    |> Enum.reduce_while({:ok, [], [], []}, fn {info, value}, {:ok, binaries, modes, frames} ->
      case prepare_input(value, info, quantize) do
        {:ok, binary, {:frame, spec}} ->
          {:cont, {:ok, [binary | binaries], [:frame | modes], [spec | frames]}}

        {:ok, binary, mode} ->
          {:cont, {:ok, [binary | binaries], [mode | modes], frames}}

        {:error, _} = error ->
          {:halt, error}
      end
    end)
    |> case do
      {:ok, binaries, modes, frames} ->
        {:ok, Enum.reverse(binaries), Enum.reverse(modes), Enum.reverse(frames)}

      error ->
        error
    end
  end

  defp proper_length(list) do
    length(list)
  rescue
    ArgumentError -> nil
  end

  # Keys are strings or atoms; "image" and :image name the same input, so a map holding both
  # is ambiguous and refused rather than one of them being used.
  defp by_name(graph, inputs) do
    Enum.reduce_while(inputs, {:ok, %{}}, fn {key, value}, {:ok, by_name} ->
      name = if is_atom(key) and key != nil, do: Atom.to_string(key), else: key

      cond do
        not is_binary(name) ->
          {:halt,
           Args.invalid_input(
             "graph `#{graph.name}`: input names must be strings or atoms, " <>
               "given the key #{Args.quote_input(key)}"
           )}

        Map.has_key?(by_name, name) ->
          {:halt,
           Args.invalid_input(
             "graph `#{graph.name}`: input #{Args.quote_input(name)} is given twice, " <>
               "as a string and as an atom; give it once"
           )}

        true ->
          {:cont, {:ok, Map.put(by_name, name, value)}}
      end
    end)
  end

  # An input named by the model (`name`) is also found by its name in the binary (`qnn_name`).
  defp order_by_name(graph, by_name) do
    renamed = Map.new(by_name, fn {key, value} -> {model_name(graph, key), value} end)
    expected = Enum.map(graph.inputs, & &1.name)

    case Enum.reject(Map.keys(renamed), &(&1 in expected)) do
      _ when map_size(renamed) < map_size(by_name) ->
        [twice | _] = for {key, _} <- by_name, model_name(graph, key) != key, do: key

        Args.invalid_input(
          "graph `#{graph.name}`: input `#{model_name(graph, twice)}` is given twice, " <>
            "by its name and by its name in the binary (#{Args.quote_input(twice)})"
        )

      [] ->
        case Enum.reject(expected, &Map.has_key?(renamed, &1)) do
          [] ->
            {:ok, Enum.map(expected, &Map.fetch!(renamed, &1))}

          missing ->
            Args.invalid_input(
              "graph `#{graph.name}`: missing input(s) #{quote_names(missing)}; " <>
                "its inputs are #{names(graph.inputs)}"
            )
        end

      unknown ->
        Args.invalid_input(
          "graph `#{graph.name}` has no input(s) named #{quote_given(unknown)}; " <>
            "its inputs are #{names(graph.inputs)}"
        )
    end
  end

  defp model_name(graph, key) do
    case Enum.find(graph.inputs, &(&1.qnn_name == key)) do
      %TensorInfo{name: name} ->
        if Enum.any?(graph.inputs, &(&1.name == key)), do: key, else: name

      nil ->
        key
    end
  end

  defp prepare_input(binary, info, quantize) when is_binary(binary),
    do: {:ok, binary, mode(info, quantize)}

  defp prepare_input({{kind, bits} = type, binary}, info, quantize)
       when kind in [:u, :s, :f, :bf] and is_integer(bits) and is_binary(binary) do
    cond do
      type == info.type ->
        {:ok, binary, :model}

      type == {:f, 32} and mode(info, quantize) == :f32 ->
        {:ok, binary, :f32}

      true ->
        Args.invalid_input(
          "input `#{info.name}`: expected #{expected_types(info, quantize)}, given #{inspect(type)}"
        )
    end
  end

  # A frame made for this input (its name, shape, type and quantization): the pass's.
  defp prepare_input(%Frame{input: made_for} = frame, info, _quantize) do
    if Map.take(made_for, @frame_fields) == Map.take(info, @frame_fields),
      do: {:ok, frame.bytes, {:frame, frame.spec}},
      else:
        Args.invalid_input(
          "input `#{info.name}`: the frame was prepared for input `#{made_for.name}` " <>
            "#{inspect(made_for.shape)} of #{inspect(made_for.type)}; make it for this one " <>
            "(HexagonTpu.Preprocess.frame/3)"
        )
  end

  defp prepare_input(tensor, info, quantize) when is_struct(tensor, Nx.Tensor),
    do: HexagonTpu.Tensor.to_input(tensor, info, quantize)

  defp prepare_input(other, info, _quantize) do
    accepted =
      if Optional.available?(Nx),
        do: "an Nx tensor, a binary, {type, binary} or a HexagonTpu.Preprocess.Frame",
        else: "a binary, {type, binary} or a HexagonTpu.Preprocess.Frame"

    Args.invalid_input(
      "input `#{info.name}`: expected #{accepted}, given #{Args.quote_input(other)}"
    )
  end

  defp expected_types(info, quantize) do
    model = "#{inspect(info.type || info.data_type)} (the model's type)"

    if mode(info, quantize) == :f32,
      do: "#{model} or {:f, 32} (quantized with the tensor's parameters)",
      else: model
  end

  defp names(infos), do: infos |> Enum.map(& &1.name) |> quote_names()
  defp quote_names(names), do: Enum.map_join(names, ", ", &"`#{&1}`")

  # Names the caller gave (not the model's): each quoted with its length capped, five at most.
  defp quote_given(names) do
    {shown, rest} = names |> Enum.sort() |> Enum.split(5)
    more = if rest == [], do: "", else: " and #{length(rest)} more"
    Enum.map_join(shown, ", ", &Args.quote_input/1) <> more
  end
end
