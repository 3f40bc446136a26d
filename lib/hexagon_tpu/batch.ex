defmodule HexagonTpu.Batch do
  @moduledoc false
  # Batches in HexagonTpu.predict/3 (documented there, "Batches"): Nx tensors whose leading
  # axis is longer or shorter than the model's, or vectorized tensors, run as as many executes
  # as the model's batch size needs, pipelined on the graph, and their outputs are put back
  # together. Binaries carry no shape, so only Nx tensors batch.

  alias HexagonTpu.{Args, Error, Graph, TensorInfo}

  # Nx is optional: present wherever an Nx.Tensor reaches this module, maybe absent at compile.
  @compile {:no_warn_undefined, [Nx]}

  # Executes in flight per batch (Graph.Call.run_async/3, as Graph.execute_async/3): one running on the graph's thread,
  # one queued behind it, so the next starts the moment the previous ends while this process
  # quantizes the one after.
  @in_flight 2

  defstruct [:size, :model_batch, :chunks, :vectorized_axes, :batched]

  @doc """
  How `ordered` (the inputs in the graph's order) runs: `:single` (one execute, as given),
  `{:ok, plan}` (a batch) or an `:invalid_input` error naming the input.
  """
  @spec plan(Graph.t(), list()) :: :single | {:ok, %__MODULE__{}} | {:error, Error.t()}
  def plan(%Graph{} = graph, ordered) when length(ordered) == length(graph.inputs) do
    kinds = Enum.zip_with(graph.inputs, ordered, &kind/2)

    case Enum.find(kinds, &match?({:error, _}, &1)) do
      {:error, _} = error -> error
      nil -> plan_kinds(graph, kinds)
    end
  end

  # Another count of inputs: the execute names what is missing.
  def plan(_graph, _ordered), do: :single

  @doc """
  Runs `plan` on `graph` with the checked execute options (`Graph.Options.check!/2`); outputs
  as predict/3 gives them.
  """
  @spec run(Graph.t(), %__MODULE__{}, list(), map()) :: {:ok, list()} | {:error, Error.t()}
  def run(graph, %__MODULE__{} = plan, ordered, options) do
    start = fn chunk ->
      Graph.Call.run_async(graph, chunk_inputs(plan, ordered, chunk), options)
    end

    case pipeline(start, options.timeout, {0, plan.chunks}, [], []) do
      {:ok, per_chunk} -> {:ok, assemble(plan, graph.outputs, per_chunk)}
      error -> error
    end
  end

  # Starts chunks until @in_flight are in flight, then awaits the oldest; the first error
  # cancels the rest.
  defp pipeline(start, timeout, {next, chunks}, in_flight, done)
       when next < chunks and length(in_flight) < @in_flight do
    case start.(next) do
      {:ok, pending} -> pipeline(start, timeout, {next + 1, chunks}, in_flight ++ [pending], done)
      {:error, %Error{}} = error -> cancel_all(in_flight, error)
    end
  end

  defp pipeline(_start, _timeout, _chunks, [], done), do: {:ok, Enum.reverse(done)}

  defp pipeline(start, timeout, chunks, [oldest | rest], done) do
    case Graph.await(oldest, timeout) do
      {:ok, outputs} -> pipeline(start, timeout, chunks, rest, [outputs | done])
      {:error, %Error{}} = error -> cancel_all(rest, error)
    end
  end

  defp cancel_all(in_flight, error) do
    Enum.each(in_flight, &Graph.cancel/1)
    error
  end

  # What an input is: :as_given (the model's shape, or not a tensor: used as is by every
  # execute), {:leading, n} (a batch of n along axis 0), or {:vectorized, axes}.
  defp kind(%TensorInfo{} = info, value) do
    cond do
      not is_struct(value, Nx.Tensor) ->
        :as_given

      value.vectorized_axes != [] ->
        vectorized_kind(info, value)

      leading_batch?(info.shape, Nx.shape(value)) ->
        {:leading, elem(Nx.shape(value), 0)}

      true ->
        :as_given
    end
  end

  defp vectorized_kind(info, tensor) do
    if Nx.shape(tensor) == info.shape and tuple_size(info.shape) >= 1 do
      {:vectorized, tensor.vectorized_axes}
    else
      Args.invalid_input(
        "input `#{info.name}` is vectorized (#{axes(tensor.vectorized_axes)}) with entries of " <>
          "shape #{inspect(Nx.shape(tensor))}; each entry must have the model's shape " <>
          "#{inspect(info.shape)}"
      )
    end
  end

  # Same rank, same trailing dimensions, another leading one.
  defp leading_batch?(model, given) do
    tuple_size(model) >= 1 and tuple_size(given) == tuple_size(model) and
      elem(given, 0) != elem(model, 0) and
      Tuple.delete_at(given, 0) == Tuple.delete_at(model, 0)
  end

  defp plan_kinds(graph, kinds) do
    batched =
      for {{info, kind}, index} <- Enum.with_index(Enum.zip(graph.inputs, kinds)),
          kind != :as_given,
          do: {index, info, kind}

    with [_ | _] <- batched,
         {:ok, size, vectorized_axes} <- one_batch(graph, batched),
         {:ok, model_batch} <- one_model_batch(graph, batched) do
      {:ok,
       %__MODULE__{
         size: size,
         model_batch: model_batch,
         chunks: div(size + model_batch - 1, model_batch),
         vectorized_axes: vectorized_axes,
         batched: Map.new(batched, fn {index, info, _kind} -> {index, info} end)
       }}
    else
      [] -> :single
      {:error, _} = error -> error
    end
  end

  # Every batched input must say the same batch: one leading size, or the same vectorized
  # axes (whose entries count as a batch of their product).
  defp one_batch(graph, batched) do
    case Enum.uniq_by(batched, fn {_index, _info, kind} -> kind end) do
      # Nx has no empty dimensions: n >= 1.
      [{_, _info, {:leading, n}}] ->
        {:ok, n, nil}

      [{_, info, {:vectorized, axes}}] ->
        {:ok, Enum.reduce(axes, 1, fn {_name, size}, acc -> acc * size end) * batch_of(info),
         axes}

      several ->
        described =
          Enum.map_join(several, ", ", fn {_, info, kind} ->
            "`#{info.name}` #{describe(kind)}"
          end)

        Args.invalid_input(
          "graph `#{graph.name}`: the batched inputs disagree (#{described}); give every " <>
            "batched input the same batch, or the model's own shape to use it for every entry"
        )
    end
  end

  defp one_model_batch(graph, batched) do
    case batched |> Enum.map(fn {_, info, _} -> batch_of(info) end) |> Enum.uniq() do
      [b] when b >= 1 ->
        {:ok, b}

      _ ->
        Args.invalid_input(
          "graph `#{graph.name}`: the batched inputs have different batch sizes in the model " <>
            "(#{Enum.map_join(batched, ", ", fn {_, info, _} -> "`#{info.name}` #{inspect(info.shape)}" end)}); " <>
            "batch them one execute at a time"
        )
    end
  end

  defp batch_of(%TensorInfo{shape: shape}), do: elem(shape, 0)

  defp describe({:leading, n}), do: "a batch of #{n}"
  defp describe({:vectorized, axes}), do: "vectorized (#{axes(axes)})"

  defp axes(axes), do: Enum.map_join(axes, ", ", fn {name, size} -> "#{name}: #{size}" end)

  # The inputs of execute `chunk`: rows chunk*b ... chunk*b + b - 1 of every batched input
  # (the last chunk padded with zeros up to the model's batch), the others as given.
  defp chunk_inputs(plan, ordered, chunk) do
    b = plan.model_batch
    start = chunk * b
    rows = min(b, plan.size - start)

    ordered
    |> Enum.with_index()
    |> Enum.map(fn {value, index} ->
      case plan.batched do
        %{^index => _info} ->
          value
          |> rows_of(plan.vectorized_axes)
          |> Nx.slice_along_axis(start, rows, axis: 0)
          |> pad_rows(b - rows)

        _ ->
          value
      end
    end)
  end

  # A vectorized input as rows: its entries one after another along axis 0.
  defp rows_of(tensor, nil), do: tensor

  defp rows_of(tensor, _axes) do
    shape = Nx.shape(tensor)

    tensor
    |> Nx.devectorize(keep_names: false)
    |> Nx.reshape(Tuple.insert_at(Tuple.delete_at(shape, 0), 0, :auto))
  end

  defp pad_rows(tensor, 0), do: tensor

  defp pad_rows(tensor, missing) do
    rest = List.duplicate({0, 0, 0}, tuple_size(Nx.shape(tensor)) - 1)
    Nx.pad(tensor, 0, [{0, missing, 0} | rest])
  end

  # Output j of every execute, put back together: an output whose leading dimension is the
  # model's batch is concatenated along it and cut to the batch's size; any other output is
  # stacked, one entry per execute. Binaries (output: :binary, 4-bit types) are joined the same
  # way, byte for byte. Vectorized batches come back vectorized with the inputs' axes.
  defp assemble(plan, output_infos, per_chunk) do
    per_chunk
    |> Enum.zip_with(& &1)
    |> Enum.zip_with(output_infos, fn chunks, info ->
      batched? = tuple_size(info.shape) >= 1 and batch_of(info) == plan.model_batch
      join(chunks, batched?, plan) |> revectorize(info, batched?, plan)
    end)
  end

  defp join([first | _] = chunks, true, plan) when is_binary(first) do
    row = div(byte_size(first), plan.model_batch)
    binary_part(IO.iodata_to_binary(chunks), 0, row * plan.size)
  end

  defp join([first | _] = chunks, false, _plan) when is_binary(first),
    do: IO.iodata_to_binary(chunks)

  defp join(chunks, true, plan),
    do: chunks |> Nx.concatenate(axis: 0) |> Nx.slice_along_axis(0, plan.size, axis: 0)

  defp join(chunks, false, _plan), do: Nx.stack(chunks)

  defp revectorize(joined, _info, _batched?, %{vectorized_axes: nil}), do: joined
  defp revectorize(joined, _info, _batched?, _plan) when is_binary(joined), do: joined

  defp revectorize(joined, info, true, plan) do
    sizes = Enum.map(plan.vectorized_axes, fn {_name, size} -> size end)
    shape = List.to_tuple(sizes ++ Tuple.to_list(info.shape))
    joined |> Nx.reshape(shape) |> Nx.vectorize(plan.vectorized_axes)
  end

  defp revectorize(joined, _info, false, plan) do
    sizes = Enum.map(plan.vectorized_axes, fn {_name, size} -> size end)
    [_chunks | entry] = Tuple.to_list(Nx.shape(joined))
    joined |> Nx.reshape(List.to_tuple(sizes ++ entry)) |> Nx.vectorize(plan.vectorized_axes)
  end
end
