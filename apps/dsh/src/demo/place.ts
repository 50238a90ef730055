import type { HostOptions } from '@dsh/host'

/**
 * Where the demo keeps its sessions: a local root (files) or a PostgreSQL
 * store. The scenario (run-demo.ts) is one; only these steps differ.
 */
export interface DemoPlace {
  /** The root directory, or the server and database (no credentials). */
  readonly location: string
  /** Wipes what an earlier demo left; refuses a place holding anything the demo did not make (nothing is changed then). */
  prepare(): Promise<void>
  /** What `createHost` needs to open this place (every phase opens a fresh host). */
  hostOptions(): Pick<HostOptions, 'root' | 'postgres'>
  /** The crash worker's arguments and extra environment (a store URL goes in the environment: `ps` shows argv). */
  worker(): { readonly args: readonly string[]; readonly env: NodeJS.ProcessEnv }
  /** After the worker was SIGKILLed: returns once its writer leases are free. */
  afterCrash(): Promise<void>
  /** Flips one byte inside a committed batch of `id` (as a disk would); returns where, as `dsh verify` names it. */
  corrupt(id: string): Promise<string>
  /** Deletes the checkpoint cache, so the next cold listing reads bodies. */
  dropCache(): Promise<void>
  close(): Promise<void>
}
