"""torchvision's own ops (a custom op library loaded after sim serves CUDA) on CUDA tensors:
nms and roi_align give what they give on the CPU. Prints one RESULT line."""
import json

import torch
import torchvision

torch.manual_seed(0)
boxes = torch.rand(20, 4) * 50
boxes[:, 2:] += boxes[:, :2]
scores = torch.rand(20)
keep = torchvision.ops.nms(boxes.cuda(), scores.cuda(), 0.5)
features = torch.randn(1, 3, 16, 16)
rois = torch.tensor([[0, 1.0, 1.0, 9.0, 9.0]])
pooled = torchvision.ops.roi_align(features.cuda(), rois.cuda(), output_size=(4, 4))
print("RESULT " + json.dumps({
    "device": str(keep.device),
    "nms_as_cpu": bool(torch.equal(keep.cpu(), torchvision.ops.nms(boxes, scores, 0.5))),
    "roi_align_as_cpu": bool(torch.allclose(pooled.cpu(), torchvision.ops.roi_align(
        features, rois, output_size=(4, 4)))),
}))
