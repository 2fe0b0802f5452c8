/* daly.h - checkpoint-interval theory: Young's and Daly's optimal intervals
 * and Daly's complete model of expected wall time (efficiency, i.e. ETTR)
 * under exponential failures. All times in seconds.
 *
 *   Young (1974):  tau = sqrt(2 delta M)
 *   Daly (2006):   tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta/2M) + (1/9) (delta/2M)] - delta
 *                  for delta < 2M, else tau = M
 *   Daly complete: T_w = M e^{R/M} (e^{(tau+delta)/M} - 1) T_s / tau,  ETTR = T_s / T_w
 *
 * delta: checkpoint stall; M: the job's MTBF; R: restart time after a failure
 * (detect + restart + reload); tau: compute time between checkpoints.
 * Source and a worked example: shared/data/reliability-numbers.md section 4. */
#ifndef GH_SIM_DALY_H
#define GH_SIM_DALY_H

/* NAN for invalid arguments (non-positive mtbf, negative stall). */
double gh_daly_young(double mtbf_s, double stall_s);
double gh_daly_optimum(double mtbf_s, double stall_s);
/* Daly's complete-model efficiency for an interval tau (> 0); NAN when invalid. */
double gh_daly_ettr(double mtbf_s, double tau_s, double stall_s, double restart_s);

#endif
