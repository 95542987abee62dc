// Types of the deploy gate's exports, for the tests that run its checks in-process.
export interface ValidateOptions {
  configPath?: string;
  env?: string;
  everyEnv?: boolean;
  vars?: Record<string, string>;
  allowDemo?: boolean;
  /** npm run deploy's check: a refusal says that nothing was deployed */
  deploying?: boolean;
}
export interface Output {
  log(line: string): void;
  error(line: string): void;
}
export const ROOT: string;
export function validate(options: ValidateOptions, out?: Output): Promise<number>;
export function varOf(text: string): [string, string] | undefined;
export function refuse(problem: string, options?: { deploying?: boolean }): never;
