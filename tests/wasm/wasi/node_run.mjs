// SPDX-License-Identifier: MIT
// Runs a WASI module under Node.js's node:wasi with one preopen, "/", for the
// differential tests: node node_run.mjs DIR MODULE ARGS... (exit code = the module's).
import { WASI } from 'node:wasi';
import { readFileSync } from 'node:fs';
const [dir, mod, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [mod, ...args], env: {}, preopens: { '/': dir }, returnOnExit: true });
const m = await WebAssembly.compile(readFileSync(dir + '/' + mod));
const inst = await WebAssembly.instantiate(m, wasi.getImportObject());
process.exitCode = wasi.start(inst);
