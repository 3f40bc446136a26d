defmodule HexagonTpu.Test.BlazeFace do
  @moduledoc false
  # MediaPipe's face_detection_short_range graph, as the tests decode BlazeFace's two outputs
  # ({1, 896, 16} boxes and keypoints, {1, 896, 1} scores): its SsdAnchorsCalculator options and
  # TensorsToDetectionsCalculator options with its NonMaxSuppression (min_suppression_threshold
  # 0.3). examples/face_boxes.exs states them again, since an example stands alone.

  alias HexagonTpu.Postprocess

  def anchors,
    do: [
      num_layers: 4,
      input_size_width: 128,
      input_size_height: 128,
      min_scale: 0.1484375,
      max_scale: 0.75,
      strides: [8, 16, 16, 16],
      fixed_anchor_size: true
    ]

  def decode_options(overrides \\ []) do
    Keyword.merge(
      [
        anchors: anchors(),
        x_scale: 128,
        y_scale: 128,
        w_scale: 128,
        h_scale: 128,
        reverse_output_order: true,
        sigmoid_score: true,
        score_clipping_thresh: 100,
        score_threshold: 0.5,
        iou_threshold: 0.3
      ],
      overrides
    )
  end

  @doc "The faces in BlazeFace's outputs, given as a map of shape to f32 binary."
  def faces!(by_shape, overrides \\ []) do
    Postprocess.ssd!(
      {by_shape[{1, 896, 16}], {1, 896, 16}},
      {by_shape[{1, 896, 1}], {1, 896, 1}},
      decode_options(overrides)
    )
  end
end
