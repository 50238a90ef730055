#!/usr/bin/env node
// `npm test` after setup: build and typecheck every package, then the unit
// lane, then the e2e lane (tooling/vitest.preset.ts reads DSH_TEST_LANE).
// Both lanes always run (`--continue`: one failing package does not hide the
// others' results), so the closing count covers everything; the exit code is
// non-zero when any step failed. The e2e lane runs fewer packages at once:
// its tests start processes, servers and a browser, and must not starve each
// other on a small machine, and only in packages that have e2e files (the
// preset fails a run that finds no test file).
import { spawnSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { repoRoot, workspacePackages } from './workspace.mjs'

const turbo = (args, env = {}) => {
  const result = spawnSync('npx', ['turbo', 'run', ...args], { cwd: repoRoot, stdio: 'inherit', env: { ...process.env, ...env } })
  return result.status ?? 1
}

if (turbo(['build', 'typecheck', '--continue']) !== 0) {
  console.error('test-lanes: build or typecheck failed; the test lanes still run where packages built.')
  process.exitCode = 1
}
const unit = turbo(['test', '--continue'], { DSH_TEST_LANE: 'unit' })
const hasE2e = ({ dir }) => {
  try {
    return readdirSync(join(repoRoot, dir, 'tests'), { recursive: true }).some((name) => String(name).endsWith('.e2e.spec.ts'))
  } catch {
    return false
  }
}
const e2eFilters = workspacePackages()
  .filter(hasE2e)
  .map(({ manifest }) => `--filter=${manifest.name}`)
const concurrency = `--concurrency=${Math.max(1, Math.floor(availableParallelism() / 2))}`
const e2e = e2eFilters.length === 0 ? 0 : turbo(['test', '--continue', concurrency, ...e2eFilters], { DSH_TEST_LANE: 'e2e' })
if (unit !== 0 || e2e !== 0) process.exitCode = 1
