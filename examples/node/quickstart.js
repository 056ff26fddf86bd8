// A starting point for Node.js: a typed array and Rust memory shared as tensors without copies.
// From your own project: `npm install <clone>/bindings/node` after building the addon there
// (docs/node.md), then `node quickstart.js`.
'use strict';
const { fromTypedArray, arange, addressOf } = require('dlbridge');

const pixels = new Float32Array([0, 1, 2, 3, 4, 5]);
const image = fromTypedArray(pixels, { shape: [2, 3] }); // a tensor over pixels' memory
console.log(String(image.shape), String(image.strides), image.dtype, image.dataPtr === addressOf(pixels));

const view = image.toTypedArray(); // the same ArrayBuffer, no copy
view[5] = 50;
console.log(pixels[5], view.buffer === pixels.buffer);

const ids = arange(4, 'int64').toTypedArray(); // Rust-owned memory, an external ArrayBuffer
console.log(ids);
