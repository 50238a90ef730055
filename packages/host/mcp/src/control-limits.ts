import { MCP_MAX_CHILDREN, MCP_MAX_CONCURRENT_RUNS, PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import type { SessionQuery } from '@dsh/session-query'
import { SUBAGENT_TOOL_NAME, type SubagentControl } from '@dsh/tool-subagent-control'
import { McpError } from './errors.js'
import { positiveOption } from './options.js'

/** How much the control tools of one server may start. */
export interface McpControlLimits {
  /** Subagent children one parent session may have; a spawn past it is `MCP_CHILD_LIMIT` (default `MCP_MAX_CHILDREN`, 64). */
  readonly maxChildren?: number
  /**
   * Child runs started over this server that may be going at once; a spawn,
   * or a message that would start an idle child, past it is `MCP_RUN_LIMIT`
   * (default `MCP_MAX_CONCURRENT_RUNS`, 8). A run counts until its child has
   * no turn running and no message queued.
   */
  readonly maxConcurrentRuns?: number
}

/**
 * How many subagent children `parentId` has, counting at most to `atMost`:
 * the query's live-preferred listing (the one the catalog enumerates), a
 * page at a time, so the read costs at most the cap.
 */
export async function countChildren(query: SessionQuery, parentId: string, atMost: number, signal?: AbortSignal): Promise<number> {
  let count = 0
  let cursor: string | undefined
  do {
    const page = await query.listSessions(
      {
        parentSession: parentId,
        origin: 'subagent',
        limit: Math.min(atMost - count, PAGE_MAX_LIMIT),
        ...(cursor === undefined ? {} : { cursor }),
      },
      signal,
    )
    count += page.records.length
    cursor = page.nextCursor
  } while (cursor !== undefined && count < atMost)
  return count
}

interface ParentCount {
  children: number
  /** Control calls acting as this parent right now; the count is dropped when none is. */
  users: number
}

/** A run this limiter counts: the session whose `wait` follows it. */
interface Counted {
  readonly caller: string
}

function idOf(ref: { readonly id: string } | string): string {
  return typeof ref === 'string' ? ref : ref.id
}

/**
 * Bounds what control calls start: children per parent and runs at once.
 *
 * - A call of the spawning tool (`subagent`, in either dialect) runs `within`
 *   its acting session: the session's child count is read first (at most
 *   `maxChildren` rows) and shared by the calls acting as it at the same time,
 *   so a `spawn` is checked synchronously against the count and the spawns
 *   before it, never against a stale read. Children are never removed, so
 *   concurrent reads merge by maximum. Other calls read nothing; a spawn from
 *   one of them is refused (`MCP_TOOL_FAILED`) rather than left unbounded.
 * - A run is counted from its start (a spawn, or a message that starts an
 *   idle child) until the child's runtime reports it idle (`isRunning` false):
 *   its handle settles, then `wait` covers the messages queued behind it.
 * - Refusals happen before anything is created: `MCP_CHILD_LIMIT`,
 *   `MCP_RUN_LIMIT`. Messages to a busy child are never refused (they queue).
 */
export class ControlLimiter {
  readonly maxChildren: number
  readonly maxConcurrentRuns: number
  /** The control the tools drive: the inner one, with spawn and send bounded. */
  readonly control: SubagentControl
  readonly #inner: SubagentControl
  readonly #count: (parentId: string, atMost: number, signal: AbortSignal) => Promise<number>
  readonly #parents = new Map<string, ParentCount>()
  readonly #running = new Map<string, Counted>()

  constructor(
    inner: SubagentControl,
    limits: McpControlLimits,
    count: (parentId: string, atMost: number, signal: AbortSignal) => Promise<number>,
  ) {
    this.maxChildren = positiveOption('maxChildren', limits.maxChildren, MCP_MAX_CHILDREN)
    this.maxConcurrentRuns = positiveOption('maxConcurrentRuns', limits.maxConcurrentRuns, MCP_MAX_CONCURRENT_RUNS)
    this.#inner = inner
    this.#count = count
    this.control = {
      spawn: (parent, options) => this.#spawn(parent, options),
      send: (childId, options, signal) => this.#send(childId, options, signal),
      wait: (childIds, options) => inner.wait(childIds, options),
      interrupt: (childId, options) => inner.interrupt(childId, options),
      close: (childId, options, signal) => inner.close(childId, options, signal),
      report: (agent, text) => inner.report(agent, text),
      explainChildren: (parentId, signal) => inner.explainChildren(parentId, signal),
      explainDescendants: (parentId, signal) => inner.explainDescendants(parentId, signal),
      queuedCount: (childId) => inner.queuedCount(childId),
      isRunning: (id) => inner.isRunning(id),
    }
  }

  /** Runs a call of `tool` acting as `sessionId`; for the spawning tool, that session's child count is read first. */
  async within<T>(tool: string, sessionId: string, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    if (tool !== SUBAGENT_TOOL_NAME) return call()
    let entry = this.#parents.get(sessionId)
    if (entry === undefined) {
      entry = { children: 0, users: 0 }
      this.#parents.set(sessionId, entry)
    }
    entry.users++
    try {
      // Read the count before merging: spawns of other calls may raise it while this read is out.
      const counted = await this.#count(sessionId, this.maxChildren, signal)
      entry.children = Math.max(entry.children, counted)
      return await call()
    } finally {
      entry.users--
      if (entry.users === 0) this.#parents.delete(sessionId)
    }
  }

  #spawn(parent: Parameters<SubagentControl['spawn']>[0], options: Parameters<SubagentControl['spawn']>[1]) {
    const parentId = idOf(parent)
    const entry = this.#parents.get(parentId)
    if (entry === undefined) {
      throw new McpError(
        'MCP_TOOL_FAILED',
        `A control call started a child of '${parentId}' outside the '${SUBAGENT_TOOL_NAME}' tool acting as that session, so its children were not counted; nothing was started.`,
      )
    }
    if (entry.children >= this.maxChildren) {
      throw new McpError(
        'MCP_CHILD_LIMIT',
        `Session '${parentId}' has ${entry.children} subagents, this server's cap per parent (maxChildren ${this.maxChildren}; dsh mcp --max-children N); no subagent was started. Give an existing child more work with send_message, or start this one from another session.`,
        { details: { parent: parentId, children: entry.children, maxChildren: this.maxChildren } },
      )
    }
    this.#admitRun()
    const handle = this.#inner.spawn(parent, options)
    entry.children++
    this.#follow(handle.id, { caller: parentId }, handle.done)
    return handle
  }

  async #send(
    childId: string,
    options: Parameters<SubagentControl['send']>[1],
    signal: AbortSignal | undefined,
  ): ReturnType<SubagentControl['send']> {
    if (this.#running.has(childId)) return this.#inner.send(childId, options, signal)
    // An idle child starts a run; a busy one (running for a reason this server did not count) queues.
    if (!this.#inner.isRunning(childId)) this.#admitRun()
    const counted: Counted = { caller: idOf(options.caller) }
    this.#running.set(childId, counted)
    try {
      const sent = await this.#inner.send(childId, options, signal)
      this.#follow(childId, counted, sent.status === 'started' ? sent.handle.done : Promise.resolve())
      return sent
    } catch (error) {
      if (this.#running.get(childId) === counted) this.#running.delete(childId)
      throw error
    }
  }

  #admitRun(): void {
    if (this.#running.size < this.maxConcurrentRuns) return
    throw new McpError(
      'MCP_RUN_LIMIT',
      `${this.#running.size} subagent runs started over this server are still going, its cap (maxConcurrentRuns ${this.maxConcurrentRuns}; dsh mcp --max-concurrent-runs N); nothing was started. Wait for one to finish or interrupt one, then try again.`,
      { details: { running: this.#running.size, maxConcurrentRuns: this.maxConcurrentRuns } },
    )
  }

  /** Counts `childId` until its runtime reports it idle: `done` first, then `wait` while queued messages run. */
  #follow(childId: string, counted: Counted, done: Promise<unknown>): void {
    this.#running.set(childId, counted)
    void (async () => {
      await done.catch(() => undefined)
      while (this.#inner.isRunning(childId)) {
        try {
          await this.#inner.wait([childId], { caller: counted.caller })
        } catch {
          break
        }
      }
      if (this.#running.get(childId) === counted) this.#running.delete(childId)
    })()
  }
}
