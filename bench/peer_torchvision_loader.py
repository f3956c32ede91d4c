"""The peer of tools/lathe-data-bench: images/s of torchvision's DataLoader on the same image
folder (PIL decode, transforms.v2 RandomResizedCrop(224), RandomHorizontalFlip, ToDtype,
Normalize; batches of 32), at 1 and 2 worker processes.

    python bench/peer_torchvision_loader.py --folder /tmp/jpegs [--workers 1,2] [--epochs 2]

Generate the folder with ./build/lathe-data-bench --generate N --folder DIR. Needs torchvision.
"""
import argparse
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--folder", required=True)
    p.add_argument("--workers", default="1,2")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    try:
        import torch
        import torchvision
        from torchvision.transforms import v2
    except ImportError as e:
        sys.exit(f"peer_torchvision_loader: needs torch and torchvision ({e}); "
                 "pip install torchvision into this environment to run the comparison")

    transform = v2.Compose([
        v2.PILToTensor(),
        v2.RandomResizedCrop(224, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = torchvision.datasets.ImageFolder(args.folder, transform=transform)
    print(f"{len(ds)} images, batch {args.batch}, {args.epochs} epochs per worker count")
    for w in [int(x) for x in args.workers.split(",")]:
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True,
                                             num_workers=w, persistent_workers=w > 0)
        images = 0
        t0 = time.perf_counter()
        for _ in range(args.epochs):
            for x, _y in loader:
                images += x.shape[0]
        s = time.perf_counter() - t0
        print(f"workers {w}  {images} images  {s:.2f} s  {images / s:.1f} images/s")


if __name__ == "__main__":
    main()
