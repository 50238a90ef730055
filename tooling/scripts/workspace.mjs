// The workspace's packages, read from pnpm-workspace.yaml's `packages` globs
// (only the `dir/*` and `dir` forms this repository uses): one place for the
// scripts that walk every package.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

/** `{ dir, manifest }` for every workspace package under `root`, sorted by directory (`dir` is relative to `root`). */
export function workspacePackages(root = repoRoot) {
  const yaml = readFileSync(join(root, 'pnpm-workspace.yaml'), 'utf8')
  const globs = []
  let inPackages = false
  for (const line of yaml.split('\n')) {
    if (/^packages:\s*$/.test(line)) inPackages = true
    else if (/^\S/.test(line)) inPackages = false
    else if (inPackages) {
      const match = /^\s+-\s+['"]?([^'"]+)['"]?\s*$/.exec(line)
      if (match) globs.push(match[1])
    }
  }
  const dirs = []
  for (const glob of globs) {
    const parts = glob.split('/')
    let current = ['']
    for (const part of parts) {
      const next = []
      for (const base of current) {
        if (part === '*') {
          const full = join(root, base)
          if (!existsSync(full)) continue
          for (const entry of readdirSync(full, { withFileTypes: true }))
            if (entry.isDirectory() && entry.name !== 'node_modules') next.push(join(base, entry.name))
        } else next.push(join(base, part))
      }
      current = next
    }
    dirs.push(...current)
  }
  return dirs
    .filter((dir) => existsSync(join(root, dir, 'package.json')))
    .sort()
    .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')) }))
}
