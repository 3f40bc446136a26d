defmodule HexagonTpu.PreprocessTest do
  # HexagonTpu.Preprocess against the same steps done separately: in plain Elixir
  # (test/support/preprocess_reference.ex, f32 emulated: bit for bit, nearest and bilinear),
  # in Nx (:nx) and in numpy (:qnn_host, the QNN venv's Python); and end to end on qnn_sim.
  use ExUnit.Case, async: true

  alias HexagonTpu.{Error, Graph, Preprocess, TensorInfo}
  alias HexagonTpu.Test.{Models, Support}
  alias HexagonTpu.Test.PreprocessReference, as: Ref

  # Nx is optional: the :nx tests run where it is loaded.
  @compile {:no_warn_undefined, [Nx]}

  @imagenet [mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]]

  defp info(shape, type, quantization) do
    {data_type, bytes} =
      case type do
        {:u, 8} -> {:ufixed_point_8, 1}
        {:s, 8} -> {:sfixed_point_8, 1}
        {:u, 16} -> {:ufixed_point_16, 2}
        {:s, 16} -> {:sfixed_point_16, 2}
        {:f, 32} -> {:float_32, 4}
        {:f, 16} -> {:float_16, 2}
      end

    size = shape |> Tuple.to_list() |> Enum.product()

    %TensorInfo{
      name: "image",
      shape: shape,
      type: type,
      data_type: data_type,
      quantization: quantization,
      byte_size: size * bytes,
      f32_conversion: quantization != :none
    }
  end

  defp per_tensor(scale, zp, bitwidth \\ nil),
    do: %{kind: :per_tensor, scale: Ref.f32(scale), zero_point: zp, bitwidth: bitwidth}

  # The reference's parameters for `opts` on `info` with a `w`x`h` frame.
  defp params(info, w, h, opts) do
    {layout, dh, dw} =
      case info.shape do
        {1, dh, dw, 3} -> {:nhwc, dh, dw}
        {1, 3, dh, dw} -> {:nchw, dh, dw}
      end

    three = fn
      n when is_number(n) -> {n * 1.0, n * 1.0, n * 1.0}
      list -> list |> Enum.map(&(&1 * 1.0)) |> List.to_tuple()
    end

    out =
      case {info.type, info.quantization} do
        {{:f, 32}, :none} ->
          :f32

        {{:f, 16}, :none} ->
          :f16

        {{kind, bits} = type, %{scale: scale, zero_point: zp} = q} ->
          bits = q.bitwidth || bits

          range =
            if kind == :u,
              do: {0, Integer.pow(2, bits) - 1},
              else: {-Integer.pow(2, bits - 1), Integer.pow(2, bits - 1) - 1}

          {type, scale, zp, range}
      end

    %{
      sw: w,
      sh: h,
      dw: dw,
      dh: dh,
      resize: Keyword.get(opts, :resize, :bilinear),
      layout: layout,
      swap: Keyword.get(opts, :pixel_format, :rgb) != Keyword.get(opts, :channels, :rgb),
      divisor: if(Keyword.get(opts, :pixel_scale, :unit) == :unit, do: 255.0, else: 1.0),
      mean: three.(Keyword.get(opts, :mean, 0.0)),
      std: three.(Keyword.get(opts, :std, 1.0)),
      out: out
    }
  end

  defp expected(frame, info, w, h, opts) do
    p = params(info, w, h, opts)
    values = Ref.values(frame, p)

    case p.out do
      :f16 -> for x <- values, into: <<>>, do: <<x::float-16-little>>
      out -> Ref.convert(values, out)
    end
  end

  describe "against the steps done separately in plain Elixir, bit for bit" do
    test "every resize, layout, channel order, scale and output type" do
      {w, h} = {23, 13}
      frame = Ref.frame(w, h)

      infos = [
        info({1, 7, 9, 3}, {:u, 8}, per_tensor(0.018658, 114)),
        info({1, 3, 7, 9}, {:s, 8}, per_tensor(0.0213, -3)),
        info({1, 7, 9, 3}, {:u, 16}, per_tensor(0.0001, 32768)),
        info({1, 3, 11, 31}, {:s, 16}, per_tensor(0.00007, 0)),
        # a 4-bit encoding in a u8 container saturates at 15
        info({1, 7, 9, 3}, {:u, 8}, per_tensor(0.25, 8, 4)),
        info({1, 3, 16, 30}, {:f, 32}, :none),
        info({1, 7, 9, 3}, {:f, 16}, :none)
      ]

      for info <- infos,
          resize <- [:nearest, :bilinear],
          pixel_format <- [:rgb, :bgr],
          scale <- [
            [pixel_scale: :unit] ++ @imagenet,
            [pixel_scale: :byte, mean: [123.675, 116.28, 103.53], std: 58.0]
          ] do
        opts = [width: w, height: h, resize: resize, pixel_format: pixel_format] ++ scale
        assert {:ok, got} = Preprocess.image(frame, info, opts)
        assert byte_size(got) == info.byte_size

        assert got == expected(frame, info, w, h, opts),
               "#{inspect(info)} #{inspect(opts)}"
      end
    end

    test "the defaults: bilinear, RGB, 0..1 scale, mean 0, std 1 (u8 at 1/255 is the pixels)" do
      frame = Ref.frame(4, 2)
      info = info({1, 2, 4, 3}, {:u, 8}, per_tensor(1 / 255, 0))
      assert {:ok, ^frame} = Preprocess.image(frame, info, width: 4, height: 2)
      assert {:ok, ^frame} = Preprocess.image(frame, info, width: 4, height: 2, resize: :nearest)

      # an unquantized u8 input: the normalized value rounded (scale 1, zero point 0)
      raw = info({2, 4, 3}, {:u, 8}, :none)
      assert {:ok, ^frame} = Preprocess.image(frame, raw, width: 4, height: 2, pixel_scale: :byte)
    end
  end

  describe "against the steps done separately in numpy" do
    # numpy is the QNN venv's (HexagonTpu.Compiler.python/0), as every :qnn_host test's Python.
    @describetag :qnn_host

    test "nearest and bilinear bit for bit" do
      {:ok, python} = HexagonTpu.Compiler.python()
      {w, h} = {161, 97}
      frame = Ref.frame(w, h, 3)

      infos = [
        info({1, 40, 56, 3}, {:u, 8}, per_tensor(0.018658, 114)),
        info({1, 3, 40, 56}, {:s, 8}, per_tensor(0.0213, -3)),
        info({1, 3, 200, 300}, {:s, 16}, per_tensor(0.00007, 0)),
        info({1, 40, 56, 3}, {:f, 32}, :none),
        info({1, 3, 40, 56}, {:f, 16}, :none)
      ]

      for info <- infos, resize <- [:nearest, :bilinear], pixel_format <- [:rgb, :bgr] do
        opts = [width: w, height: h, resize: resize, pixel_format: pixel_format] ++ @imagenet
        {:ok, got} = Preprocess.image(frame, info, opts)
        numpy = Ref.numpy!(python, frame, params(info, w, h, opts))

        assert got == numpy, "#{inspect(info)} #{inspect(opts)}"
      end
    end
  end

  describe "against the steps done separately in Nx" do
    @describetag :nx

    test "Nx frames; nearest and bilinear bit for bit" do
      {w, h} = {64, 36}
      bytes = Ref.frame(w, h, 5)
      frame = bytes |> Nx.from_binary({:u, 8}) |> Nx.reshape({h, w, 3})

      infos = [
        info({1, 22, 22, 3}, {:u, 8}, per_tensor(0.018658, 114)),
        info({1, 3, 22, 30}, {:s, 8}, per_tensor(0.0213, -3)),
        info({1, 3, 50, 90}, {:u, 16}, per_tensor(0.0001, 32768)),
        info({1, 22, 30, 3}, {:f, 32}, :none)
      ]

      for info <- infos, resize <- [:nearest, :bilinear], pixel_format <- [:rgb, :bgr] do
        opts = [resize: resize, pixel_format: pixel_format] ++ @imagenet
        {:ok, got} = Preprocess.image(frame, info, opts)
        nx = nx_reference(frame, info, params(info, w, h, opts))

        # bilinear is integer arithmetic (OpenCV's fixed point), then the f32 normalization
        assert got == nx, "#{inspect(info)} #{inspect(opts)}"

        # the binary frame gives the same bytes
        assert {:ok, ^got} = Preprocess.image(bytes, info, opts ++ [width: w, height: h])
      end

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Preprocess.image(Nx.as_type(frame, {:f, 32}), hd(infos))

      assert message =~ "expected an Nx tensor of type {:u, 8} and shape {height, width, 3}"
    end
  end

  # The steps in Nx: resize (take; bilinear in integers), channel order, normalize, layout, quantize
  # (round half to even written out: Nx.round rounds half away from zero).
  defp nx_reference(frame, info, p) do
    v =
      case p.resize do
        :nearest ->
          ys = Nx.iota({p.dh}) |> Nx.multiply(2) |> Nx.add(1) |> Nx.multiply(p.sh)
          ys = ys |> Nx.quotient(2 * p.dh) |> Nx.min(p.sh - 1)
          xs = Nx.iota({p.dw}) |> Nx.multiply(2) |> Nx.add(1) |> Nx.multiply(p.sw)
          xs = xs |> Nx.quotient(2 * p.dw) |> Nx.min(p.sw - 1)
          frame |> Nx.take(ys, axis: 0) |> Nx.take(xs, axis: 1) |> Nx.as_type({:f, 32})

        :bilinear ->
          # OpenCV's u8 fixed point (the taps: Ref's, checked against cv2 by hand), in s32
          [y0, y1, b0, b1] = Ref.linear_taps(:row, p.sh, p.dh) |> Enum.map(&Nx.tensor/1)
          [x0, x1, a0, a1] = Ref.linear_taps(:column, p.sw, p.dw) |> Enum.map(&Nx.tensor/1)
          f = Nx.as_type(frame, {:s, 32})
          {a0, a1} = {Nx.reshape(a0, {1, p.dw, 1}), Nx.reshape(a1, {1, p.dw, 1})}

          h =
            Nx.add(
              Nx.multiply(Nx.take(f, x0, axis: 1), a0),
              Nx.multiply(Nx.take(f, x1, axis: 1), a1)
            )
            |> Nx.right_shift(4)

          blend = fn rows, b ->
            h
            |> Nx.take(rows, axis: 0)
            |> Nx.multiply(Nx.reshape(b, {p.dh, 1, 1}))
            |> Nx.right_shift(16)
          end

          Nx.add(blend.(y0, b0), blend.(y1, b1))
          |> Nx.add(2)
          |> Nx.right_shift(2)
          |> Nx.clip(0, 255)
          |> Nx.as_type({:f, 32})
      end

    v = if p.swap, do: Nx.reverse(v, axes: [2]), else: v
    mean = Nx.tensor(Tuple.to_list(p.mean), type: {:f, 32})
    std = Nx.tensor(Tuple.to_list(p.std), type: {:f, 32})

    x =
      v |> Nx.divide(Nx.tensor(p.divisor, type: {:f, 32})) |> Nx.subtract(mean) |> Nx.divide(std)

    x = if p.layout == :nchw, do: Nx.transpose(x, axes: [2, 0, 1]), else: x

    case p.out do
      :f32 ->
        Nx.to_binary(x)

      {type, scale, zp, {qmin, qmax}} ->
        r = Nx.divide(x, Nx.tensor(scale, type: {:f, 32}))
        fl = Nx.floor(r)
        diff = Nx.subtract(r, fl)
        up = Nx.add(fl, 1)
        even = Nx.equal(Nx.remainder(fl, 2), 0)
        tie = Nx.select(even, fl, up)
        q = Nx.select(Nx.greater(diff, 0.5), up, Nx.select(Nx.less(diff, 0.5), fl, tie))
        q |> Nx.add(zp) |> Nx.clip(qmin, qmax) |> Nx.as_type(type) |> Nx.to_binary()
    end
    |> tap(fn bin -> assert byte_size(bin) == info.byte_size end)
  end

  describe "end to end on qnn_sim" do
    setup do
      t = Models.t(:ufixed_point_8, [1, 12, 16, 3], {:per_tensor, 0.018658, -114})
      %{graph: Support.load!(Models.identity(t, t))}
    end

    test "preprocess -> predict gives what predict gives on the reference f32 tensor", %{
      graph: graph
    } do
      {w, h} = {40, 30}
      frame = Ref.frame(w, h, 7)
      [input] = Graph.inputs(graph)

      for resize <- [:nearest, :bilinear] do
        opts = [width: w, height: h, resize: resize, pixel_format: :bgr] ++ @imagenet
        {:ok, bytes} = Preprocess.image(frame, graph, opts)

        # the reference tensor: the normalized values as f32, quantized by predict/3 itself
        values = frame |> Ref.values(params(input, w, h, opts)) |> Ref.convert(:f32)

        {:ok, [from_f32]} =
          HexagonTpu.predict(graph, [values], dequantize: :none, output: :binary)

        {:ok, [from_bytes]} =
          HexagonTpu.predict(graph, [{input.type, bytes}], dequantize: :none, output: :binary)

        {:ok, [from_predict]} =
          Preprocess.predict(graph, frame, opts ++ [dequantize: :none, output: :binary])

        assert from_bytes == from_f32
        assert from_predict == from_f32
        # the identity model hands back its input: the pass's bytes are what QNN read
        assert from_bytes == bytes
      end
    end

    test "an f32 NCHW input takes the normalized values" do
      t = Models.t(:float_32, [1, 3, 5, 7])
      graph = Support.load!(Models.identity(t, t))
      frame = Ref.frame(9, 8)
      opts = [width: 9, height: 8, channels: :bgr] ++ @imagenet
      {:ok, [out]} = Preprocess.predict(graph, frame, opts ++ [output: :binary])
      [input] = Graph.inputs(graph)
      assert out == frame |> Ref.values(params(input, 9, 8, opts)) |> Ref.convert(:f32)
    end

    test "a graph with several inputs: :input names the image, :inputs gives the others" do
      a = Models.t(:ufixed_point_8, [1, 2, 2, 3], {:per_tensor, 1 / 255, 0})
      graph = Support.load!(Models.add(a, a, a))
      frame = Ref.frame(2, 2)

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Preprocess.image(frame, graph, width: 2, height: 2)

      assert message =~ ~s[has 2 inputs ("a", "b")]
      assert {:ok, ^frame} = Preprocess.image(frame, graph, width: 2, height: 2, input: "b")
      assert {:ok, ^frame} = Preprocess.image(frame, graph, width: 2, height: 2, input: 1)

      zeros = <<0::size(12 * 8)>>

      assert {:ok, [^frame]} =
               Preprocess.predict(graph, frame,
                 width: 2,
                 height: 2,
                 input: :a,
                 inputs: %{"b" => {{:u, 8}, zeros}},
                 dequantize: :none,
                 output: :binary
               )
    end
  end

  describe "errors" do
    setup do
      %{info: info({1, 4, 4, 3}, {:u, 8}, per_tensor(0.02, 128))}
    end

    test "a frame of the wrong size is :invalid_input", %{info: info} do
      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Preprocess.image(<<0::size(100 * 8)>>, info, width: 20, height: 14)

      assert message =~ "expected a rgb frame of 20x14 (stride 60) of at least 840 bytes"
      assert message =~ "got 100 bytes"
    end

    test "a model input that is not an image is :invalid_input", %{info: info} do
      frame = Ref.frame(4, 4)
      opts = [width: 4, height: 4]

      for {bad, says} <- [
            {%{info | shape: {1, 1000}}, "is not an image"},
            {%{info | shape: {2, 4, 4, 3}}, "is not an image"},
            {%{info | shape: {1, 4, 4, 4}}, "expected a shape {1, H, W, 3} (NHWC)"},
            {%{
               info
               | quantization: %{
                   kind: :per_axis,
                   axis: 3,
                   scales: [0.1, 0.1, 0.1],
                   zero_points: [0, 0, 0],
                   bitwidth: nil
                 }
             }, "quantized per axis"},
            {%{info | type: {:u, 32}, data_type: :ufixed_point_32}, "not a type the pass writes"}
          ] do
        assert {:error, %Error{reason: :invalid_input, message: message}} =
                 Preprocess.image(frame, bad, opts)

        assert message =~ says
      end

      assert {:error, %Error{reason: :invalid_input, message: message}} =
               Preprocess.image(frame, info, opts ++ [layout: :nchw])

      assert message =~ "(layout: :nchw)"
    end

    test "a wrong type raises ArgumentError naming the function and argument", %{info: info} do
      fun = "HexagonTpu.Preprocess.image/3"
      frame = Ref.frame(4, 4)

      for {args, says} <- [
            {[:frame, info, []], "#{fun}: `frame` must be a binary"},
            {[frame, info, []], "#{fun}: a binary frame needs the :width and :height options"},
            {[frame, :model, [width: 4, height: 4]],
             "#{fun}: `model` must be a HexagonTpu.Graph"},
            {[frame, info, [width: 0, height: 4]],
             "the :width option must be a positive integer"},
            {[frame, info, [width: 4, height: 4, mean: [1, 2]]], "the :mean option must be"},
            {[frame, info, [width: 4, height: 4, std: [1, 0, 1]]],
             "the :std option must be non-zero"},
            {[frame, info, [width: 4, height: 4, resize: :cubic]], ":bilinear or :nearest"},
            {[frame, info, [size: 4]], "unknown option :size"},
            {[frame, info, :opts], "`opts` must be a keyword list"}
          ] do
        error = assert_raise ArgumentError, fn -> apply(Preprocess, :image, args) end
        assert error.message =~ says
      end

      assert_raise ArgumentError,
                   ~r/Preprocess.predict\/3: `model` must be a HexagonTpu.Graph/,
                   fn ->
                     Preprocess.predict(info, frame, width: 4, height: 4)
                   end
    end
  end
end
