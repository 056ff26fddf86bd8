/**
 * ESM entry point of dlbridge: the same module as index.js (one native addon per process
 * either way), with named exports.
 * @module dlbridge
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dlbridge = require('./index.js');

export const {
  DLPACK_VERSION,
  Tensor,
  fromTypedArray,
  empty,
  arange,
  importPointer,
  releasePointer,
  addressOf,
  fromTensorObject,
  emptyShared,
  toShared,
  fromShared,
  diagnostics,
  _testHooks,
} = dlbridge;

export default dlbridge;
