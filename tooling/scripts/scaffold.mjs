// One-off: writes the skeleton of each workspace package (kept for reference of
// the layout; rerunning never overwrites existing files).
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join, relative } from 'node:path'

const pkgs = [
  ['packages/core/context', '@dsh/context', [], {}],
  ['packages/core/session', '@dsh/session', ['@dsh/context'], {}],
  ['packages/session/session-persistence', '@dsh/session-persistence', ['@dsh/context', '@dsh/session'], { vitest: '5.1.2' }],
  [
    'packages/session/session-persistence-jsonl',
    '@dsh/session-persistence-jsonl',
    ['@dsh/context', '@dsh/session', '@dsh/session-persistence'],
    { '@mongodb-js/zstd': '1.2.2' },
  ],
  ['packages/session/session-projection', '@dsh/session-projection', ['@dsh/context', '@dsh/session'], { zod: '4.6.7' }],
  [
    'packages/session/session-projection-cache',
    '@dsh/session-projection-cache',
    ['@dsh/context', '@dsh/session', '@dsh/session-persistence', '@dsh/session-projection'],
    { 'better-sqlite3': '12.9.0' },
  ],
  [
    'packages/session-query/session-query',
    '@dsh/session-query',
    ['@dsh/context', '@dsh/session', '@dsh/session-persistence'],
    { vitest: '5.1.2' },
  ],
  [
    'packages/session-query/session-query-sqlite',
    '@dsh/session-query-sqlite',
    ['@dsh/context', '@dsh/session', '@dsh/session-persistence', '@dsh/session-query'],
    { 'better-sqlite3': '12.9.0' },
  ],
  [
    'packages/subagent/subagent',
    '@dsh/subagent',
    [
      '@dsh/context',
      '@dsh/session',
      '@dsh/session-persistence',
      '@dsh/session-projection',
      '@dsh/session-projection-cache',
      '@dsh/session-query',
    ],
    { zod: '4.6.7' },
  ],
  [
    'packages/subagent/tool-subagent-control',
    '@dsh/tool-subagent-control',
    ['@dsh/context', '@dsh/session', '@dsh/subagent'],
    { zod: '4.6.7' },
  ],
  [
    'packages/host/apiproxy',
    '@dsh/apiproxy',
    [
      '@dsh/context',
      '@dsh/session',
      '@dsh/session-persistence',
      '@dsh/session-projection',
      '@dsh/session-query',
      '@dsh/session-query-sqlite',
      '@dsh/subagent',
      '@dsh/tool-subagent-control',
    ],
    { zod: '4.6.7' },
  ],
  ['packages/wire/client', '@dsh/client', ['@dsh/apiproxy'], { zod: '4.6.7' }],
]
const devExtra = {
  '@dsh/session-persistence-jsonl': ['@dsh/session-projection'],
  '@dsh/session-projection-cache': ['@dsh/session-persistence-jsonl'],
  '@dsh/session-query': ['@dsh/session-persistence-jsonl'],
  '@dsh/session-query-sqlite': ['@dsh/session-persistence-jsonl'],
  '@dsh/subagent': ['@dsh/session-persistence-jsonl', '@dsh/session-query-sqlite'],
  '@dsh/tool-subagent-control': [
    '@dsh/session-projection',
    '@dsh/session-query',
    '@dsh/session-persistence',
    '@dsh/session-persistence-jsonl',
  ],
  '@dsh/apiproxy': ['@dsh/session-persistence-jsonl', '@dsh/session-projection-cache', '@dsh/client'],
}
const root = process.cwd()
const put = (file, text) => {
  if (!existsSync(file)) writeFileSync(file, text)
}
for (const [dir, name, deps, ext] of pkgs) {
  mkdirSync(join(dir, 'src'), { recursive: true })
  mkdirSync(join(dir, 'tests'), { recursive: true })
  const up = relative(join(root, dir), root)
  const dependencies = Object.fromEntries([...deps.map((d) => [d, 'workspace:*']), ...Object.entries(ext)])
  const devDependencies = Object.fromEntries((devExtra[name] ?? []).map((d) => [d, 'workspace:*']))
  put(
    join(dir, 'package.json'),
    `${JSON.stringify(
      {
        name,
        version: '0.1.0',
        type: 'module',
        license: 'MIT',
        engines: { node: '>=20' },
        exports: { '.': { '@dsh/source': './src/index.ts', types: './dist/index.d.ts', default: './dist/index.js' } },
        files: ['dist', 'src'],
        scripts: { build: 'tsc -p tsconfig.build.json', typecheck: 'tsc -p tsconfig.json --noEmit', test: 'vitest run' },
        dependencies,
        devDependencies,
      },
      null,
      2,
    )}\n`,
  )
  put(
    join(dir, 'tsconfig.json'),
    `${JSON.stringify(
      { extends: `${up}/tooling/tsconfig.base.json`, compilerOptions: { rootDir: '.', noEmit: true }, include: ['src', 'tests'] },
      null,
      2,
    )}\n`,
  )
  put(
    join(dir, 'tsconfig.build.json'),
    `${JSON.stringify(
      { extends: `${up}/tooling/tsconfig.base.json`, compilerOptions: { rootDir: 'src', outDir: 'dist' }, include: ['src'] },
      null,
      2,
    )}\n`,
  )
  put(join(dir, 'vitest.config.ts'), `export { default } from '${up}/tooling/vitest.preset.ts'\n`)
  put(join(dir, 'src', 'index.ts'), 'export {}\n')
}
