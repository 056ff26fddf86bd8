'use strict';
// The example addon, built next to this file by `node build-addon.js`.
module.exports = require('./tensorops.node');
