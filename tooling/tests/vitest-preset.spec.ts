import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

// The shared preset, run for real on planted fixtures (tests/fixtures/preset:
// `*.fixture.ts`, which this package's own include never picks up): a process
// warning or an unhandled rejection fails the run, and so does a run that
// finds no test file.

const repoRoot = join(import.meta.dirname, '..', '..')
const fixtures = join(import.meta.dirname, 'fixtures', 'preset')
const vitest = join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs')

function runFixture(filter: string): { status: number | null; output: string } {
  // The worker's own vitest variables would tell the child it is a worker.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')))
  const result = spawnSync(process.execPath, [vitest, 'run', '--root', fixtures, '--color=false', filter], {
    encoding: 'utf8',
    env: { ...env, NO_COLOR: '1' },
  })
  return { status: result.status, output: `${result.stdout}\n${result.stderr}` }
}

describe('vitest preset', () => {
  it('passes a fixture that emits nothing (the harness itself works)', () => {
    const { status, output } = runFixture('clean.fixture.ts')
    expect(output).toMatch(/Tests\s+1 passed \(1\)/)
    expect(status).toBe(0)
  })

  it('fails the test during which a MaxListenersExceededWarning is emitted, with the warning text', () => {
    const { status, output } = runFixture('listener-leak.fixture.ts')
    expect(output).toContain('process warning during this test or the hooks before it')
    expect(output).toContain('MaxListenersExceededWarning: Possible EventEmitter memory leak detected. 2 planted listeners added')
    expect(output).toMatch(/Tests\s+1 failed \(1\)/)
    expect(status).toBe(1)
  })

  it('fails the file when a DeprecationWarning is emitted in a hook after its last test', () => {
    const { status, output } = runFixture('deprecation-after-all.fixture.ts')
    expect(output).toContain('process warning while loading this file or in its hooks')
    expect(output).toContain('DeprecationWarning: planted deprecation')
    expect(output).toMatch(/Test Files\s+1 failed \(1\)/)
    expect(status).toBe(1)
  })

  it('fails a run with an unhandled rejection, though every test passed', () => {
    const { status, output } = runFixture('unhandled-rejection.fixture.ts')
    expect(output).toContain('Unhandled Rejection')
    expect(output).toContain('Error: planted unhandled rejection')
    expect(output).toMatch(/Tests\s+1 passed \(1\)/)
    expect(status).toBe(1)
  })

  it('fails a run that finds no test file', () => {
    const { status, output } = runFixture('no-such.fixture.ts')
    expect(output).toContain('No test files found')
    expect(status).toBe(1)
  })
})
