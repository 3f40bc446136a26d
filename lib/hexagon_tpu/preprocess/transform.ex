defmodule HexagonTpu.Preprocess.Transform do
  @moduledoc """
  Where `HexagonTpu.Preprocess` put the frame in the model input, and the way back: a point
  `(mx, my)` in model input pixels is the frame point

      x = mx * x_scale + x_offset
      y = my * y_scale + y_offset

  (continuous pixel coordinates: `0.0` is a pixel's left edge, the model input's and the
  frame's alike). `content` is `{x, y, width, height}`: the rectangle of the model input the
  crop was resized into (all of it with `fit: :stretch`); outside it is padding.
  `x_scale = crop_width / width`, `y_scale = crop_height / height`,
  `x_offset = crop_x - x * x_scale`, `y_offset = crop_y - y * y_scale`.

  Made by `HexagonTpu.Preprocess.transform/2`, and used by `HexagonTpu.Postprocess`'s
  decoders (`letterbox:`) to map the kept boxes to the frame. `content` is `nil` in one made
  from the decoders' older letterbox map, which does not say it.
  """

  @enforce_keys [:x_scale, :y_scale, :x_offset, :y_offset, :content]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          x_scale: float(),
          y_scale: float(),
          x_offset: float(),
          y_offset: float(),
          content: {non_neg_integer(), non_neg_integer(), pos_integer(), pos_integer()} | nil
        }

  @doc """
  A box `{x1, y1, x2, y2}` or a point `{x, y}` in model input pixels, in frame pixels (not
  clipped to the frame: a box reaching into the padding reaches outside the crop).
  """
  @spec to_frame(t(), {number(), number(), number(), number()} | {number(), number()}) ::
          {float(), float(), float(), float()} | {float(), float()}
  def to_frame(%__MODULE__{} = t, {x1, y1, x2, y2}) do
    {a, b} = to_frame(t, {x1, y1})
    {c, d} = to_frame(t, {x2, y2})
    {a, b, c, d}
  end

  def to_frame(%__MODULE__{} = t, {x, y}) when is_number(x) and is_number(y),
    do: {x * t.x_scale + t.x_offset, y * t.y_scale + t.y_offset}
end
