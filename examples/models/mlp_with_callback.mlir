module @jit_classify attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x6xf32>) -> (tensor<4x3xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<[[6.15076686E-4, 0.149372771, -0.137068927, -0.44529593, -0.227335393, -0.495823264, 3.007180e-02, 0.670107603, -0.246103257, -0.310237437, 0.244921029, 0.178443506, 0.0527071245, -4.652340e-01, -0.0146259116, 0.347651601], [-0.672107279, -0.228807881, -0.950611352, -0.644768893, -0.920867502, -0.117545567, -0.633723259, 0.135632172, 0.0783755406, -0.0934654697, -1.25837982, -0.269346446, -0.024250472, 0.0566544943, -0.765067875, -0.238876641], [-0.489259541, -0.404418617, 0.530449331, -0.403767347, -0.016260853, 0.442194939, -0.291800231, -0.0558509752, 0.0552320704, 0.0318908878, -0.612527906, 0.0380701162, 0.679411709, -0.773572325, 0.429691344, 0.0596770123], [-0.320735186, 1.00020826, 0.381129861, -0.599644423, 0.0372581147, 0.2883448, -0.0943910629, 0.341455132, -0.0332586616, 0.333623767, 0.719261289, -0.33783114, 0.101569302, -0.231653795, 0.0636342093, -0.593597293], [-0.289650798, -0.0980979874, 0.449381948, 5.726110e-01, -0.661763906, -0.397321194, 0.323451698, -0.996209919, -0.231584936, -0.0486434624, 0.628507495, 0.344701946, -0.163606703, -0.18428795, -0.125097707, 0.761764705], [-0.214012474, -0.151840195, 0.176294535, -0.0603852235, -0.0986421108, -0.557033598, -0.00576073397, -0.221790612, 0.5830639, 0.326544255, -0.0120718069, 0.334190518, -0.169934779, 0.526063204, -0.00269978028, 0.291691184]]> : tensor<6x16xf32>
    %cst_0 = stablehlo.constant dense<[-0.129089326, 0.034668006, -0.168820411, -0.203532889, -0.030447688, -0.0899927616, 0.0164052788, 0.224475667, -0.0831723213, -0.0623943582, 0.0205403939, 0.04930133, -0.0176406074, -0.0205930322, 0.0702462941, 0.0519907624]> : tensor<16xf32>
    %cst_1 = stablehlo.constant dense<[[-0.516837895, -0.0395906605, 0.0176434238], [-0.527242303, 0.129919544, -0.428978235], [0.48603335, 0.0963729545, 0.0446532443], [-0.295514166, -0.0593049116, -0.998873174], [-0.56570375, 0.181419894, -1.06428349], [0.42330426, -0.873048245, 0.378369242], [-0.422748506, 0.389495552, 0.0654756054], [-0.768417477, 0.624574363, 0.720853567], [-0.0329024531, -0.136958137, -0.0799334794], [-0.487576157, 0.549293399, -0.27144596], [-0.0255952068, -0.396648198, -0.313036561], [-0.63886255, 0.628534675, -0.0770437866], [0.48296082, 0.00666229846, -0.347201765], [-0.163342625, -0.280115515, 0.00397954974], [-0.187633425, -0.149960861, -0.689287364], [-0.403422952, 0.827028751, -0.335616618]]> : tensor<16x3xf32>
    %cst_2 = stablehlo.constant dense<[-0.105409376, 0.033732634, 0.140727222]> : tensor<3xf32>
    %0 = stablehlo.dot_general %arg0, %cst, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x6xf32>, tensor<6x16xf32>) -> tensor<4x16xf32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x16xf32>) -> tensor<4x16xf32>
    %3 = stablehlo.add %0, %2 : tensor<4x16xf32>
    %4 = call @relu(%3) : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %5 = stablehlo.custom_call @xla_actors.host_callback(%4) {backend_config = "", has_side_effect = true, mhlo.backend_config = {callback = "calibrate"}, operand_layouts = [dense<[1, 0]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : tensor<2xindex>]} : (tensor<4x16xf32>) -> tensor<4x16xf32>
    %6 = stablehlo.dot_general %5, %cst_1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x16xf32>, tensor<16x3xf32>) -> tensor<4x3xf32>
    %7 = stablehlo.broadcast_in_dim %cst_2, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<4x3xf32>
    %9 = stablehlo.add %6, %8 : tensor<4x3xf32>
    %cst_3 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %10 = stablehlo.reduce(%9 init: %cst_3) applies stablehlo.maximum across dimensions = [1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
    %cst_4 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %11 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %12 = stablehlo.maximum %11, %10 : tensor<4xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x3xf32>
    %15 = stablehlo.subtract %9, %14 : tensor<4x3xf32>
    %16 = stablehlo.exponential %15 : tensor<4x3xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %17 = stablehlo.reduce(%16 init: %cst_5) applies stablehlo.add across dimensions = [1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0] : (tensor<4xf32>) -> tensor<4x1xf32>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x3xf32>
    %20 = stablehlo.divide %16, %19 : tensor<4x3xf32>
    return %20 : tensor<4x3xf32>
  }
  func.func private @relu(%arg0: tensor<4x16xf32>) -> tensor<4x16xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x16xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<4x16xf32>
    return %1 : tensor<4x16xf32>
  }
}
