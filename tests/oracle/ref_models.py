"""Reference models of the Lathe benchmark, written in plain torch.nn.

Each model reproduces the module tree of its original (torchvision, Hugging Face
transformers BertModel, timm VisionTransformer) so that its state_dict has the same
parameter and buffer names, shapes and dtypes: a model.safetensors saved from the
original loads here, and into Lathe, with no renaming. Initialisation follows the
originals' schemes closely enough that activations stay in a realistic range; exact
init values do not matter because the oracle always saves the weights it used.

    build(name, **cfg) -> nn.Module
    default_input(name, batch, seed, **cfg) -> tuple of tensors
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

MODEL_NAMES = (
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "alexnet",
    "vgg16",
    "mobilenet_v2",
    "mnasnet1_0",
    "squeezenet1_1",
    "bert",
    "vit",
)
CNN_NAMES = MODEL_NAMES[:8]


# ---------------------------------------------------------------- ResNet / ResNeXt


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64):
        super().__init__()
        if groups != 1 or base_width != 64:
            raise ValueError("[BasicBlock] only groups=1, base_width=64 are defined")
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    # ResNet v1.5: the stride sits on the 3x3 convolution.
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64):
        super().__init__()
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, groups=1, width_per_group=64):
        super().__init__()
        self.inplanes = 64
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1)
        self.layer2 = self._make_layer(block, 128, layers[1], 2)
        self.layer3 = self._make_layer(block, 256, layers[2], 2)
        self.layer4 = self._make_layer(block, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _make_layer(self, block, planes, blocks, stride):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample, self.groups, self.base_width)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, 1, None, self.groups, self.base_width))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---------------------------------------------------------------- AlexNet / VGG


class AlexNet(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG(nn.Module):
    def __init__(self, cfg=VGG16_CFG, num_classes=1000, dropout=0.5):
        super().__init__()
        layers, in_ch = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(in_ch, v, 3, padding=1), nn.ReLU(inplace=True)]
                in_ch = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(True),
            nn.Dropout(dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(True),
            nn.Dropout(dropout),
            nn.Linear(4096, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# ---------------------------------------------------------------- MobileNetV2


class ConvNormActivation(nn.Sequential):
    """torchvision's Conv2dNormActivation: children 0 conv (no bias), 1 BatchNorm, 2 act."""

    def __init__(self, in_ch, out_ch, kernel_size=3, stride=1, groups=1, activation=nn.ReLU6):
        padding = (kernel_size - 1) // 2
        super().__init__(
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
            activation(inplace=True),
        )
        self.out_channels = out_ch


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        self.stride = stride
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvNormActivation(inp, hidden, kernel_size=1))
        layers += [
            ConvNormActivation(hidden, hidden, stride=stride, groups=hidden),
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s); width multiplier 1.0, so every
    # channel count is already a multiple of 8 and torchvision's rounding changes nothing.
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        in_ch, last_ch = 32, 1280
        features: list[nn.Module] = [ConvNormActivation(3, in_ch, stride=2)]
        for t, c, n, s in self.SETTING:
            for i in range(n):
                features.append(InvertedResidual(in_ch, c, s if i == 0 else 1, t))
                in_ch = c
        features.append(ConvNormActivation(in_ch, last_ch, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(last_ch, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---------------------------------------------------------------- MNASNet 1.0

# torchvision ports the TensorFlow decay 0.9997 to PyTorch's momentum convention.
MNASNET_BN_MOMENTUM = 1 - 0.9997


class _InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, kernel_size, stride, expansion, bn_momentum):
        super().__init__()
        mid = in_ch * expansion
        self.apply_residual = in_ch == out_ch and stride == 1
        self.layers = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, bias=False),
            nn.BatchNorm2d(mid, momentum=bn_momentum),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, kernel_size, stride, kernel_size // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid, momentum=bn_momentum),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, out_ch, 1, bias=False),
            nn.BatchNorm2d(out_ch, momentum=bn_momentum),
        )

    def forward(self, x):
        return self.layers(x) + x if self.apply_residual else self.layers(x)


def _mnasnet_stack(in_ch, out_ch, kernel_size, stride, expansion, repeats, bn_momentum):
    blocks = [_InvertedResidual(in_ch, out_ch, kernel_size, stride, expansion, bn_momentum)]
    blocks += [
        _InvertedResidual(out_ch, out_ch, kernel_size, 1, expansion, bn_momentum)
        for _ in range(repeats - 1)
    ]
    return nn.Sequential(*blocks)


class MNASNet(nn.Module):
    DEPTHS = (32, 16, 24, 40, 80, 96, 192, 320)  # alpha 1.0

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        d, m = self.DEPTHS, MNASNET_BN_MOMENTUM
        self.layers = nn.Sequential(
            nn.Conv2d(3, d[0], 3, 2, 1, bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[0], 3, 1, 1, groups=d[0], bias=False),
            nn.BatchNorm2d(d[0], momentum=m),
            nn.ReLU(inplace=True),
            nn.Conv2d(d[0], d[1], 1, bias=False),
            nn.BatchNorm2d(d[1], momentum=m),
            _mnasnet_stack(d[1], d[2], 3, 2, 3, 3, m),
            _mnasnet_stack(d[2], d[3], 5, 2, 3, 3, m),
            _mnasnet_stack(d[3], d[4], 5, 2, 6, 3, m),
            _mnasnet_stack(d[4], d[5], 3, 1, 6, 2, m),
            _mnasnet_stack(d[5], d[6], 5, 2, 6, 4, m),
            _mnasnet_stack(d[6], d[7], 3, 1, 6, 1, m),
            nn.Conv2d(d[7], 1280, 1, bias=False),
            nn.BatchNorm2d(1280, momentum=m),
            nn.ReLU(inplace=True),
        )
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True),
                                        nn.Linear(1280, num_classes))
        for mod in self.modules():
            if isinstance(mod, nn.Conv2d):
                nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(mod, nn.BatchNorm2d):
                nn.init.ones_(mod.weight)
                nn.init.zeros_(mod.bias)
            elif isinstance(mod, nn.Linear):
                nn.init.kaiming_uniform_(mod.weight, mode="fan_out", nonlinearity="sigmoid")
                nn.init.zeros_(mod.bias)

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))


# ---------------------------------------------------------------- SqueezeNet 1.1


class Fire(nn.Module):
    def __init__(self, in_ch, squeeze, expand1x1, expand3x3):
        super().__init__()
        self.squeeze = nn.Conv2d(in_ch, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat([self.expand1x1_activation(self.expand1x1(x)),
                          self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, num_classes=1000, dropout=0.5):
        super().__init__()
        self.num_classes = num_classes
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        final_conv = nn.Conv2d(512, num_classes, 1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    nn.init.normal_(m.weight, 0.0, 0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# ---------------------------------------------------------------- BERT (HF BertModel)


@dataclasses.dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden: int = 768
    layers: int = 12
    heads: int = 12
    intermediate: int = 3072
    max_position: int = 512
    type_vocab: int = 2
    eps: float = 1e-12
    pad_token_id: int = 0


class BertEmbeddings(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden, padding_idx=c.pad_token_id)
        self.position_embeddings = nn.Embedding(c.max_position, c.hidden)
        self.token_type_embeddings = nn.Embedding(c.type_vocab, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(0.1)
        # Non-persistent, as in transformers >= 4.31: not part of the state_dict.
        self.register_buffer("position_ids", torch.arange(c.max_position).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros((1, c.max_position), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        seq = input_ids.shape[1]
        if token_type_ids is None:
            token_type_ids = self.token_type_ids[:, :seq].expand(input_ids.shape[0], seq)
        x = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) +
             self.position_embeddings(self.position_ids[:, :seq]))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        if c.hidden % c.heads != 0:
            raise ValueError(f"[bert] hidden {c.hidden} is not a multiple of heads {c.heads}")
        self.num_attention_heads = c.heads
        self.attention_head_size = c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.dropout = nn.Dropout(0.1)

    def _split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

    def forward(self, x, additive_mask):
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.attention_head_size) + additive_mask
        ctx = self.dropout(scores.softmax(-1)) @ v
        return ctx.transpose(1, 2).reshape(x.shape)


class BertSelfOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, x, additive_mask):
        return self.output(self.self(x, additive_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.intermediate)
        self.intermediate_act_fn = nn.GELU()  # erf form, HF "gelu"

    def forward(self, x):
        return self.intermediate_act_fn(self.dense(x))


class BertOutput(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.intermediate, c.hidden)
        self.LayerNorm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertLayer(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, x, additive_mask):
        a = self.attention(x, additive_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c.layers))

    def forward(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, c: BertConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden, c.hidden)
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config)
        for m in self.modules():  # HF _init_weights with initializer_range 0.02
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear):
                    nn.init.zeros_(m.bias)
                elif m.padding_idx is not None:
                    with torch.no_grad():
                        m.weight[m.padding_idx].zero_()
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        dtype = self.embeddings.word_embeddings.weight.dtype
        additive = (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        h = self.encoder(self.embeddings(input_ids), additive)
        return h, self.pooler(h)


# ---------------------------------------------------------------- ViT (timm)


@dataclasses.dataclass
class ViTConfig:
    img_size: int = 224
    patch: int = 16
    depth: int = 12
    dim: int = 768
    heads: int = 12
    classes: int = 1000
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    eps: float = 1e-6
    in_chans: int = 3


VIT_CONFIGS = {
    "vit_small_patch16_224": ViTConfig(dim=384, depth=12, heads=6),
    "vit_base_patch16_224": ViTConfig(dim=768, depth=12, heads=12),
}


class PatchEmbed(nn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        if c.img_size % c.patch != 0:
            raise ValueError(f"[vit] image size {c.img_size} is not a multiple of patch {c.patch}")
        self.num_patches = (c.img_size // c.patch) ** 2
        self.proj = nn.Conv2d(c.in_chans, c.dim, c.patch, c.patch)
        self.norm = nn.Identity()

    def forward(self, x):
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class Attention(nn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        if c.dim % c.heads != 0:
            raise ValueError(f"[vit] dim {c.dim} is not a multiple of heads {c.heads}")
        self.num_heads = c.heads
        self.head_dim = c.dim // c.heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(c.dim, c.dim * 3, bias=c.qkv_bias)
        self.q_norm = nn.Identity()
        self.k_norm = nn.Identity()
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(c.dim, c.dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = self.q_norm(qkv[0]), self.k_norm(qkv[1]), qkv[2]
        attn = self.attn_drop(((q * self.scale) @ k.transpose(-2, -1)).softmax(-1))
        return self.proj_drop(self.proj((attn @ v).transpose(1, 2).reshape(b, n, d)))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(0.0)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


class Block(nn.Module):
    def __init__(self, c: ViTConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(c.dim, eps=c.eps)
        self.attn = Attention(c)
        self.ls1 = nn.Identity()
        self.drop_path1 = nn.Identity()
        self.norm2 = nn.LayerNorm(c.dim, eps=c.eps)
        self.mlp = Mlp(c.dim, int(c.dim * c.mlp_ratio))
        self.ls2 = nn.Identity()
        self.drop_path2 = nn.Identity()

    def forward(self, x):
        x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x))))
        return x + self.drop_path2(self.ls2(self.mlp(self.norm2(x))))


class VisionTransformer(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        c = self.config = config
        self.patch_embed = PatchEmbed(c)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, c.dim))
        self.pos_drop = nn.Dropout(0.0)
        self.patch_drop = nn.Identity()
        self.norm_pre = nn.Identity()
        self.blocks = nn.Sequential(*[Block(c) for _ in range(c.depth)])
        self.norm = nn.LayerNorm(c.dim, eps=c.eps)
        self.fc_norm = nn.Identity()
        self.head_drop = nn.Dropout(0.0)
        self.head = nn.Linear(c.dim, c.classes) if c.classes > 0 else nn.Identity()
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.norm_pre(self.patch_drop(self.pos_drop(x + self.pos_embed)))
        x = self.norm(self.blocks(x))
        return self.head(self.head_drop(self.fc_norm(x[:, 0])))


# ---------------------------------------------------------------- registry

_CNN_BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "resnet18": lambda **k: ResNet(BasicBlock, (2, 2, 2, 2), **k),
    "resnet50": lambda **k: ResNet(Bottleneck, (3, 4, 6, 3), **k),
    "resnext50_32x4d": lambda **k: ResNet(Bottleneck, (3, 4, 6, 3), groups=32, width_per_group=4,
                                          **k),
    "alexnet": AlexNet,
    "vgg16": VGG,
    "mobilenet_v2": MobileNetV2,
    "mnasnet1_0": MNASNet,
    "squeezenet1_1": SqueezeNet,
}


def bert_config(**cfg) -> BertConfig:
    return BertConfig(**cfg)


def vit_config(variant: str = "vit_base_patch16_224", **cfg) -> ViTConfig:
    if variant not in VIT_CONFIGS:
        raise ValueError(f"[ref_models] unknown vit variant {variant!r}: {sorted(VIT_CONFIGS)}")
    return dataclasses.replace(VIT_CONFIGS[variant], **cfg)


def _canonical(name: str, cfg: dict) -> tuple[str, dict]:
    if name in VIT_CONFIGS:
        return "vit", {"variant": name, **cfg}
    return name, cfg


def build(name: str, **cfg) -> nn.Module:
    """Builds the reference model `name` (see MODEL_NAMES) on the current default device.

    CNNs take num_classes (and dropout); "bert" takes BertConfig fields; "vit" takes
    variant= (a VIT_CONFIGS key, default vit_base_patch16_224) and ViTConfig fields.
    The names in VIT_CONFIGS are accepted as model names too.
    """
    name, cfg = _canonical(name, cfg)
    if name in _CNN_BUILDERS:
        return _CNN_BUILDERS[name](**cfg)
    if name == "bert":
        return BertModel(bert_config(**cfg))
    if name == "vit":
        return VisionTransformer(vit_config(**cfg))
    raise ValueError(f"[ref_models] unknown model {name!r}: {MODEL_NAMES}")


def default_input(name: str, batch: int = 1, seed: int = 0, image_size: int | None = None,
                  seq_len: int = 128, **cfg) -> tuple[torch.Tensor, ...]:
    """Random inputs for `name`: images [B,3,S,S] (S=224 unless image_size, or the vit
    config's img_size), or for bert (input_ids [B,seq_len] int64 in [0,vocab),
    attention_mask of ones int64). `cfg` is the model's build config."""
    name, cfg = _canonical(name, cfg)
    g = torch.Generator().manual_seed(seed)
    if name == "bert":
        c = bert_config(**cfg)
        ids = torch.randint(0, c.vocab_size, (batch, seq_len), generator=g, dtype=torch.int64)
        return ids, torch.ones(batch, seq_len, dtype=torch.int64)
    if name == "vit":
        size = vit_config(**cfg).img_size if image_size is None else image_size
        return (torch.randn(batch, 3, size, size, generator=g),)
    if name in _CNN_BUILDERS:
        size = 224 if image_size is None else image_size
        return (torch.randn(batch, 3, size, size, generator=g),)
    raise ValueError(f"[ref_models] unknown model {name!r}: {MODEL_NAMES}")
