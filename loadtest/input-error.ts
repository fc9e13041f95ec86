// An error in what the user gave (an option, a file): the program says so in one line and exits 2.
export const badInput = (message: string): Error => Object.assign(new Error(message), { badInput: true });

export const isBadInput = (e: unknown): boolean => (e as { badInput?: boolean } | null)?.badInput === true;
