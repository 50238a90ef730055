import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import Database from 'better-sqlite3'
import { type BudgetedResult, createBudgetedReader, type StatementBudget } from './budget.js'
import type { ReadStatement } from './read-statements.js'

/**
 * The worker's whole program. It opens its own read-only connection to the
 * index file (the main thread stays the one writer) and runs the budgeted
 * reader on it. The reader is `createBudgetedReader`'s own source, so the
 * budget logic exists once.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.sqlite)
const db = new Database(workerData.path, { readonly: true, fileMustExist: true, timeout: 5000 })
const reader = (${createBudgetedReader.toString()})(db)
parentPort.on('message', (request) => {
  let reply
  try {
    reply = { id: request.id, result: reader.run(request.statements, request.budget) }
  } catch (error) {
    reply = { id: request.id, error: { message: String((error && error.message) || error), code: error && error.code } }
  }
  parentPort.postMessage(reply)
})
`

type Reply = { id: number; result: BudgetedResult } | { id: number; error: { message: string; code?: unknown } }

interface Pending {
  resolve(result: BudgetedResult): void
  reject(error: unknown): void
}

/**
 * Runs request-serving reads in a worker thread, so a slow statement delays
 * only its own request: the event loop keeps serving everything else, and
 * `close()` never waits for a statement (the worker is terminated; a running
 * statement is abandoned at its next row, when `dsh_budget` re-enters the
 * terminated isolate). One worker, requests in order. After the index file
 * is replaced (a rebuild swapped a new generation in) call `restart(file)`:
 * the old connection would keep reading the replaced file.
 */
export class WorkerReader {
  #path: string
  readonly #closedError: () => Error
  #worker: Worker | undefined
  #next = 0
  readonly #pending = new Map<number, Pending>()

  /** `path`: the database file itself (a generation), not the index path's link. */
  constructor(path: string, closedError: () => Error) {
    this.#path = path
    this.#closedError = closedError
  }

  /** Requests posted and not yet answered. */
  get inFlight(): number {
    return this.#pending.size
  }

  run(statements: readonly ReadStatement[], budget: StatementBudget): Promise<BudgetedResult> {
    const worker = this.#spawned()
    const id = ++this.#next
    return new Promise<BudgetedResult>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      // Referenced only while a request waits: an idle worker never keeps a process alive.
      worker.ref()
      worker.postMessage({ id, statements, budget })
    })
  }

  /** Drops the worker (its requests fail); the next `run` starts a new one on `file`. */
  restart(file: string): void {
    this.#path = file
    this.#stop(() => new Error('The index reader was restarted because the index file was replaced.'))
  }

  /** Rejects every request with the closed error and terminates the worker without waiting for it. */
  close(): void {
    this.#stop(this.#closedError)
  }

  #stop(error: () => Error): void {
    const worker = this.#worker
    this.#worker = undefined
    for (const pending of this.#pending.values()) pending.reject(error())
    this.#pending.clear()
    if (worker !== undefined) void worker.terminate()
  }

  #spawned(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path: this.#path, sqlite } })
    worker.unref()
    worker.on('message', (reply: Reply) => {
      const pending = this.#pending.get(reply.id)
      if (pending === undefined) return
      this.#pending.delete(reply.id)
      if (this.#pending.size === 0) worker.unref()
      if ('result' in reply) pending.resolve(reply.result)
      else
        pending.reject(
          typeof reply.error.code === 'string'
            ? new Database.SqliteError(reply.error.message, reply.error.code)
            : new Error(reply.error.message),
        )
    })
    const fail = (error: unknown): void => {
      if (this.#worker !== worker) return
      this.#worker = undefined
      for (const pending of this.#pending.values()) pending.reject(error)
      this.#pending.clear()
    }
    worker.on('error', fail)
    worker.on('exit', (code) => fail(new Error(`The index reader worker exited (code ${code}).`)))
    this.#worker = worker
    return worker
  }
}
