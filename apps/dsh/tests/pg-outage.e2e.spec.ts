import { execFile, spawn } from 'node:child_process'
import { join } from 'node:path'
import { startTestCluster, type TestCluster } from '@dsh/session-persistence-postgres/testing'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// A PostgreSQL outage under the built CLI: `dsh serve` and `dsh mcp` on a
// throwaway cluster that is stopped (pg_ctl stop -m fast) for 10 s and started
// again. Both run with --unhandled-rejections=warn, so an unhandled rejection
// is counted on stderr instead of ending the process (Node's default would
// exit; a process that stays up with none counted would stay up either way).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const token = 'pg-outage-token-0123456789'
const OUTAGE_MS = 10_000
/** Polls after the server is back: this many attempts, 250 ms apart (5 s of waiting; request time comes on top). */
const RECOVERY_POLLS = 20
const UNHANDLED = /UnhandledPromiseRejection|unhandledRejection|Uncaught/g

let cluster: TestCluster
let url: string

beforeAll(async () => {
  cluster = await startTestCluster({ settings: { fsync: 'off' } })
  url = await cluster.createDatabase()
  const demo = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [bin, 'demo', '--store', url, '--json'],
      { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '' } },
      (error, _stdout, stderr) => resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stderr }),
    )
  })
  expect(demo.code, demo.stderr).toBe(0)
})

afterAll(async () => {
  await cluster?.stop()
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** `dsh serve --store` with its stderr collected; resolves once it printed where it listens. */
async function serve() {
  const child = spawn(process.execPath, ['--unhandled-rejections=warn', bin, 'serve', '--json', '--store', url], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '', DSH_TOKEN: token },
  })
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const info = await new Promise<{ url: string }>((resolve, reject) => {
    let out = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
      try {
        resolve(JSON.parse(out))
      } catch {
        // wait for the whole object
      }
    })
    void exited.then((code) => reject(new Error(`serve exited early (${String(code)}): ${stderr}`)))
  })
  return { child, info, stderr: () => stderr }
}

/** `dsh mcp --store` under the SDK's client, with its stderr collected and its end noticed. */
async function mcp() {
  const { DSH_API_KEY: _a, OPENAI_API_KEY: _b, ...inherited } = process.env as Record<string, string>
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--unhandled-rejections=warn', bin, 'mcp', '--store', url],
    env: { ...inherited, DSH_STORE: '', DSH_DATABASE_URL: '' },
    stderr: 'pipe',
  })
  let stderr = ''
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8')
  })
  const client = new Client({ name: 'dsh-pg-outage', version: '1.0.0' })
  let closed = false
  client.onclose = () => {
    closed = true
  }
  await client.connect(transport)
  return { client, pid: transport.pid, stderr: () => stderr, closed: () => closed }
}

const PATHS = [
  '/api/sessions',
  '/api/sessions/release-1.4/history',
  '/api/sessions/release-1.4/subagents?scope=descendants',
  '/api/sessions/release-1.4/subagents/release-1.4.researcher/history',
  '/api/search?q=plan',
]

const CALLS: Array<{ name: string; arguments: Record<string, unknown> }> = [
  { name: 'list_sessions', arguments: {} },
  { name: 'show_session', arguments: { id: 'release-1.4' } },
  { name: 'list_agents', arguments: { id: 'release-1.4', scope: 'descendants' } },
  { name: 'search', arguments: { text: 'plan' } },
]

describe('dsh serve and dsh mcp on PostgreSQL through a 10 s outage', () => {
  it('stay up, answer 503 and typed MCP errors during it, answer again within 5 s of polling after it, with no unhandled rejection', async () => {
    const server = await serve()
    const agent = await mcp()
    try {
      const get = async (path: string) => {
        const response = await fetch(`${server.info.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
        return { status: response.status, body: (await response.json()) as { code?: string } }
      }
      for (const path of PATHS) expect((await get(path)).status, path).toBe(200)
      for (const call of CALLS) {
        const result = await agent.client.callTool(call)
        expect(result.isError ?? false, `${call.name}: ${JSON.stringify(result.content)}`).toBe(false)
      }

      await cluster.stopServer()
      const stopped = performance.now()
      let rounds = 0
      const httpCodes = new Set<string>()
      const mcpCodes = new Set<string>()
      while (performance.now() - stopped < OUTAGE_MS) {
        for (const path of PATHS) {
          const { status, body } = await get(path)
          expect(status, `${path} during the outage: ${JSON.stringify(body)}`).toBe(503)
          expect(body.code).toMatch(/^[A-Z][A-Z_]+$/)
          httpCodes.add(body.code!)
        }
        for (const call of CALLS) {
          const result = await agent.client.callTool(call)
          expect(result.isError, `${call.name} during the outage`).toBe(true)
          const code = (result.structuredContent as { error?: { code?: string } }).error?.code
          // A typed failure of the storage behind the tool, never an untyped tool failure.
          expect(code, `${call.name}: ${JSON.stringify(result.content)}`).toMatch(/^SESSION_[A-Z_]+$/)
          mcpCodes.add(code!)
        }
        rounds++
        await sleep(1_000)
      }
      expect(rounds).toBeGreaterThan(0)
      expect(server.child.exitCode).toBeNull()
      expect(agent.closed()).toBe(false)

      await cluster.startServer()
      const back = performance.now()
      const recovered: Record<string, { polls: number; ms: number }> = {}
      for (const path of PATHS) {
        let poll = 0
        for (; ; poll++) {
          const { status } = await get(path)
          if (status === 200) break
          expect(poll, `${path} still ${status} after ${RECOVERY_POLLS} polls`).toBeLessThan(RECOVERY_POLLS)
          await sleep(250)
        }
        recovered[path] = { polls: poll, ms: Math.round(performance.now() - back) }
      }
      for (const call of CALLS) {
        let poll = 0
        for (; ; poll++) {
          const result = await agent.client.callTool(call)
          if (result.isError !== true) break
          expect(poll, `${call.name} still failing after ${RECOVERY_POLLS} polls: ${JSON.stringify(result.content)}`).toBeLessThan(
            RECOVERY_POLLS,
          )
          await sleep(250)
        }
        recovered[call.name] = { polls: poll, ms: Math.round(performance.now() - back) }
      }
      // The figures (failed polls before the first answer, ms from the server accepting connections), for the record, never asserted.
      console.info('pg outage: codes during it', { http: [...httpCodes], mcp: [...mcpCodes] }, 'answered again after (ms)', recovered)

      // Let the background loops (LISTEN re-opens, cache refresh) run their course, then look at both processes.
      await sleep(3_000)
      expect(server.child.exitCode).toBeNull()
      expect(server.child.signalCode).toBeNull()
      expect(agent.closed()).toBe(false)
      expect(agent.pid !== null && isAlive(agent.pid)).toBe(true)
      expect(server.stderr().match(UNHANDLED) ?? [], server.stderr()).toEqual([])
      expect(agent.stderr().match(UNHANDLED) ?? [], agent.stderr()).toEqual([])
    } finally {
      await agent.client.close()
      if (server.child.exitCode === null && server.child.signalCode === null) {
        const exited = new Promise((resolve) => server.child.once('exit', resolve))
        server.child.kill('SIGTERM')
        await exited
      }
    }
  })
})

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
