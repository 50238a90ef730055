import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { join } from 'node:path'
import { PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { expect } from 'vitest'

/** The built CLI, run as a user runs it: its own process. */
export const DSH_BIN = join(import.meta.dirname, '..', '..', 'dist', 'bin.cjs')

/** Model settings a test must not inherit from the machine's environment. */
const MODEL_ENV = [
  'DSH_API_KEY',
  'OPENAI_API_KEY',
  'ANTHROPIC_API_KEY',
  'DSH_BASE_URL',
  'OPENAI_BASE_URL',
  'ANTHROPIC_BASE_URL',
  'DSH_MODEL',
]

/** This process's environment without any model key, URL or model, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of MODEL_ENV) delete env[name]
  return { ...env, ...extra }
}

export interface DshResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `dsh args…` to its end. */
export function dshRun(args: readonly string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<DshResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [DSH_BIN, ...args],
      { env, maxBuffer: 16 << 20, ...(cwd === undefined ? {} : { cwd }) },
      (error, stdout, stderr) => {
        resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr })
      },
    )
  })
}

/** One event of a session's log, as `dsh show --json` prints it. */
export interface Event {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
}

/** Every event of session `id` in `root`, oldest first, read page by page with `dsh show --json` run in `env` (and `cwd`). */
export async function history(id: string, root: string, env: NodeJS.ProcessEnv, cwd?: string): Promise<Event[]> {
  const pages: Event[][] = []
  let before: number | undefined
  for (;;) {
    const args = ['show', id, '--json', '--limit', String(PAGE_MAX_LIMIT), '--root', root]
    const shown = await dshRun(before === undefined ? args : [...args, '--before', String(before)], env, cwd)
    expect(shown.code, shown.stderr).toBe(0)
    const page = JSON.parse(shown.stdout) as { events: Event[]; nextBefore?: number }
    pages.unshift(page.events)
    if (page.nextBefore === undefined) return pages.flat()
    before = page.nextBefore
  }
}

export interface Started {
  readonly child: ChildProcess
  /** stdout and stderr so far. */
  output(): string
  /** The exit code, or null when a signal ended it. */
  readonly exited: Promise<number | null>
}

/** Starts `dsh args…` and collects its output. */
export function dshStart(args: readonly string[], env: NodeJS.ProcessEnv, cwd?: string): Started {
  const child = spawn(process.execPath, [DSH_BIN, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd === undefined ? {} : { cwd }),
  })
  let output = ''
  child.stdout?.on('data', (part: Buffer) => (output += part.toString()))
  child.stderr?.on('data', (part: Buffer) => (output += part.toString()))
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal === null ? code : null)))
  return { child, output: () => output, exited }
}

/** Polls `condition` until it holds (at most 600 checks; the verdict never depends on how long they take). */
export async function until(condition: () => Promise<boolean> | boolean, what: string): Promise<void> {
  for (let attempt = 0; attempt < 600; attempt++) {
    if (await condition()) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`gave up waiting for ${what}`)
}
