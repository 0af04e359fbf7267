// Record the reference server's frames: `node record.mjs <langgraph dev url> <out.json>`
// (record.sh starts the server). The fixture is what compare.mjs holds graphloom to.
import fs from "node:fs";
import { converse } from "./drive.mjs";

const [api, out] = process.argv.slice(2);
const frames = await converse(api);
fs.writeFileSync(out, JSON.stringify(frames, null, 1) + "\n");
console.log(`recorded ${frames.first.length} + ${frames.second.length} events into ${out}`);
