/* Native replay loop of isaaclab_sysid (see docs/replay.md).
 *
 * One call replays one run for one candidate on one (private) mjModel/mjData
 * pair: it writes the candidate's joint parameters into the model, recomputes
 * the model constants (mj_setConst, as the compiler would), starts at q_init
 * with zero velocity, and steps 1 ms ticks from -warmup to the last sample
 * tick. Every tick: kinematics at the current state (mj_step1), sample if the
 * tick is a sample instant, controller (joint_pd or task_impedance) from the
 * current state and the zero-order-held setpoint, actuator delay, slew limit,
 * clamp, then integrate (mj_step2, plus plain substeps for a finer integrator).
 *
 * Friction (sim/friction.py, docs/friction.md): viscous damping (dof_damping) plus one dry-friction law. The
 * constraint laws set MuJoCo's frictionloss budget every tick (Coulomb: constant; Stribeck: from the velocity,
 * before mj_step1 and at every substep; load-dependent: from the tick's motor and external torques, written into
 * the friction rows mj_step1 built, after the controller); the force laws add their torque to qfrc_applied, once
 * per tick (sigmoid: from the velocity; Dahl: its bristle state, advanced exactly over the tick).
 *
 * The servo controller is a smart servo's firmware loop and DC motor (sim/servo.py, docs/servo_arms.md): the
 * delayed goal row [goal (N), torque enable (N), supply voltage (N)] gives a PWM duty from the register gain kp,
 * kept in the firmware's current-limit window and clipped to its largest duty; the motor's torque is
 * kt (duty V - kt dq) / R, zero while the torque is off. No clamp or slew limit: the motor saturates itself.
 *
 * The torque "controller" replays a measured torque instead (one shooting
 * window of a torque-driven replay): it starts at the window's first sample
 * tick from (q_init, qd_init), without warm-up, and applies the per-tick torque
 * torque_ff[k - delay] (held at its first/last row outside the array).
 *
 * Python calls it through ctypes (the GIL is released), one thread per core.
 * The struct layout is mirrored in sim/native_lib.py: change both together.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mujoco/mujoco.h>

#define SYSID_ABI_VERSION 7
#define CTRL_JOINT_PD 0
#define CTRL_TASK_IMPEDANCE 1
#define CTRL_TORQUE 2
#define CTRL_SERVO 3
/* the servo controller's columns (sim/servo.py: SERVO_COLUMNS) */
#define SERVO_COLS 6
#define MAXV 64
/* friction laws (sim/friction.py: LAW_IDS; docs/friction.md) */
#define FRIC_COULOMB 0
#define FRIC_STRIBECK 1
#define FRIC_SIGMOID 2
#define FRIC_LOAD 3
#define FRIC_DAHL 4
#define LAW_COLS 4
#define LOAD_BUDGET_FLOOR 1e-9

typedef struct {
  /* schedule */
  int32_t warmup;              /* W: ticks the first setpoint is held before tick 0 */
  int32_t n_setpoints;         /* K */
  int32_t sp_dim;              /* D: N (joint_pd) or 7 (task_impedance: xyz, quat xyzw) */
  int32_t n_samples;           /* T */
  const int64_t* sp_tick;      /* (K,) tick each setpoint takes effect, sorted, sp_tick[0] = 0 */
  const double* sp_val;        /* (K, D) */
  const int64_t* sample_tick;  /* (T,) strictly increasing, >= -W */
  /* controller */
  int32_t controller;
  int32_t site_id;
  int32_t coriolis;            /* task_impedance: add C(q, qd) qd */
  int32_t orient_rotvec;       /* 0: 2 vec(q_des q^-1), 1: rotation vector of R_des R^T */
  const double* kp;            /* (N,) or (6,) */
  const double* kd;
  double max_pos_err;          /* <= 0: no clip */
  double max_ori_err;
  double ns_stiffness;         /* null-space stiffness (0 = off), damping 2 sqrt(k) */
  const double* q_rest;        /* (N,) */
  /* actuator */
  int32_t delay;               /* ticks */
  int32_t clamp;
  int32_t slew;
  int32_t substeps;            /* >= 1: physics steps per 1 ms tick */
  double tick_s;               /* > 0: the tick [s] (isaaclab_sysid.timebase.TICK_S) */
  const double* tau_max;       /* (N,) */
  const double* slew_per_tick; /* (N,) [N m per tick] */
  const double* disturbance;   /* (W + last + 1, N) added to the applied torque, or NULL */
  /* joint parameters (N,) */
  const double* armature;
  const double* friction;
  const double* viscous;
  int32_t fric_law;            /* FRIC_*: the dry-friction law on top of the viscous damping */
  const double* law_p;         /* (N, LAW_COLS) the law's parameters (sim/friction.py: FrictionLaw.columns), or NULL */
  double load_gravity;         /* FRIC_LOAD: gravity [m/s^2] the gearbox carries that the replay does not simulate
                                  (a gravity-compensated arm replayed gravity-free), else 0 */
  double gravity;              /* gravity magnitude along -z [m/s^2] (0 = gravity-free) */
  double max_qvel;             /* divergence threshold [rad/s] */
  const double* q_init;        /* (N,) */
  const double* qd_init;       /* (N,) start velocity, or NULL (= 0) */
  const double* torque_ff;     /* torque controller: (n_torque, N) torque at ticks 0..n_torque-1 [N m] */
  int64_t n_torque;
  const double* servo_p;       /* servo controller: (N, SERVO_COLS) error gain [1/rad], largest duty, current limit [A]
                                  (<= 0: none), nominal supply [V], kt [N m/A], R [Ohm]; else NULL */
  /* outputs (T, .) */
  double* out_q;               /* (T, N) */
  double* out_dq;              /* (T, N) */
  double* out_pos;             /* (T, 3) */
  double* out_quat;            /* (T, 4) xyzw; NULL: not recorded (a states-only rollout) */
  double* out_tau;             /* (T, N) applied torque; NULL: not recorded */
  double* out_tau_cmd;         /* (T, N) controller output before delay/slew/clamp, or NULL */
  /* result */
  int64_t diverged_tick;       /* tick of divergence (valid when the call returns 1) */
} SysidReplayJob;

int sysid_abi_version(void) { return SYSID_ABI_VERSION; }
int sysid_job_size(void) { return (int)sizeof(SysidReplayJob); }

/* setpoint index active at tick k (k < 0 -> the first) */
static int active_setpoint(const SysidReplayJob* job, int64_t k, int cur) {
  if (k < 0) return 0;
  while (cur + 1 < job->n_setpoints && job->sp_tick[cur + 1] <= k) cur++;
  while (cur > 0 && job->sp_tick[cur] > k) cur--;
  return cur;
}

static void clip_norm(double* v, double maxn) {
  if (maxn <= 0) return;
  double n = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  if (n > maxn) {
    double s = maxn / n;
    v[0] *= s; v[1] *= s; v[2] *= s;
  }
}

/* generalized gravity force of a hinge chain under the gravity vector grav (what qfrc_bias holds besides C qd,
   negated, when grav is the model's) */
static void gravity_force_of(const mjModel* m, const mjData* d, const double* grav, double* g_out) {
  for (int j = 0; j < m->nv; j++) {
    int b = m->dof_bodyid[j], jnt = m->dof_jntid[j];
    const double* axis = d->xaxis + 3 * jnt;
    const double* anchor = d->xanchor + 3 * jnt;
    double mass = m->body_subtreemass[b];
    double r[3] = {d->subtree_com[3 * b] - anchor[0], d->subtree_com[3 * b + 1] - anchor[1],
                   d->subtree_com[3 * b + 2] - anchor[2]};
    double f[3] = {mass * grav[0], mass * grav[1], mass * grav[2]};
    double t[3] = {r[1] * f[2] - r[2] * f[1], r[2] * f[0] - r[0] * f[2], r[0] * f[1] - r[1] * f[0]};
    g_out[j] = axis[0] * t[0] + axis[1] * t[1] + axis[2] * t[2];
  }
}

static void gravity_force(const mjModel* m, const mjData* d, double* g_out) {
  gravity_force_of(m, d, m->opt.gravity, g_out);
}

static void task_impedance(const mjModel* m, mjData* d, const SysidReplayJob* job, const double* sp,
                           double* jac, double* tau) {
  int nv = m->nv;
  double* jacp = jac;
  double* jacr = jac + 3 * nv;
  mj_jacSite(m, d, jacp, jacr, job->site_id);
  const double* x = d->site_xpos + 3 * job->site_id;
  const double* xmat = d->site_xmat + 9 * job->site_id;
  double e[6], xdot[6], f[6];
  for (int i = 0; i < 3; i++) e[i] = sp[i] - x[i];
  /* orientation: quaternions wxyz */
  double qcur[4], qdes[4] = {sp[6], sp[3], sp[4], sp[5]}, qinv[4], qe[4];
  mju_mat2Quat(qcur, xmat);
  double nd = sqrt(qdes[0] * qdes[0] + qdes[1] * qdes[1] + qdes[2] * qdes[2] + qdes[3] * qdes[3]);
  for (int i = 0; i < 4; i++) qdes[i] /= nd;
  mju_negQuat(qinv, qcur);
  mju_mulQuat(qe, qdes, qinv); /* q_des q^-1: rotation from current to desired, world frame */
  if (qe[0] < 0) for (int i = 0; i < 4; i++) qe[i] = -qe[i];
  if (job->orient_rotvec) {
    mju_quat2Vel(e + 3, qe, 1.0);
  } else {
    e[3] = 2 * qe[1]; e[4] = 2 * qe[2]; e[5] = 2 * qe[3];
  }
  clip_norm(e, job->max_pos_err);
  clip_norm(e + 3, job->max_ori_err);
  mju_mulMatVec(xdot, jac, d->qvel, 6, nv);
  for (int i = 0; i < 6; i++) f[i] = job->kp[i] * e[i] - job->kd[i] * xdot[i];
  mju_mulMatTVec(tau, jac, f, 6, nv);
  if (job->coriolis) {
    /* qfrc_bias = C(q, qd) qd - g(q); remove the gravity part if the model has gravity */
    if (job->gravity != 0.0) {
      double g[MAXV];
      gravity_force(m, d, g);
      for (int j = 0; j < nv; j++) tau[j] += d->qfrc_bias[j] + g[j];
    } else {
      for (int j = 0; j < nv; j++) tau[j] += d->qfrc_bias[j];
    }
  }
  if (job->ns_stiffness > 0) {
    double k = job->ns_stiffness, c = 2.0 * sqrt(k);
    double y[MAXV], z[6], w[6], a[36], jtw[MAXV];
    for (int j = 0; j < nv; j++) y[j] = k * (job->q_rest[j] - d->qpos[j]) - c * d->qvel[j];
    mju_mulMatVec(z, jac, y, 6, nv);
    mju_mulMatMatT(a, jac, jac, 6, nv, 6);
    mju_cholFactor(a, 6, 1e-12);
    mju_cholSolve(w, a, z, 6);
    mju_mulMatTVec(jtw, jac, w, 6, nv);
    for (int j = 0; j < nv; j++) tau[j] += y[j] - jtw[j];
  }
}

static void set_friction(mjModel* m, const SysidReplayJob* job, const mjData* d) {
  /* Stribeck: friction torque Fc + (Fs - Fc) exp(-|v / vs|^delta), as MuJoCo frictionloss (law_p: Fs, vs, delta) */
  for (int j = 0; j < m->nv; j++) {
    const double* p = job->law_p + (size_t)j * LAW_COLS;
    double fc = job->friction[j];
    double v = fabs(d->qvel[j] / p[1]);
    double e = p[2] == 2.0 ? v * v : pow(v, p[2]);
    m->dof_frictionloss[j] = fc + (p[0] - fc) * exp(-e);
  }
}

/* the sigmoid law's friction torque on each joint (law_p: phi1, phi2, phi3; Gaz et al. 2019) */
static void sigmoid_force(const SysidReplayJob* job, const mjData* d, int nv, double* f) {
  for (int j = 0; j < nv; j++) {
    const double* p = job->law_p + (size_t)j * LAW_COLS;
    f[j] = -(p[0] / (1.0 + exp(-p[1] * (d->qvel[j] + p[2]))) - p[0] / (1.0 + exp(-p[1] * p[2])));
  }
}

/* the Dahl bristle force after dt at the tick's velocity (exact for a constant velocity; law_p: sigma0) */
static void dahl_step(const SysidReplayJob* job, const mjData* d, int nv, double dt, double* state) {
  for (int j = 0; j < nv; j++) {
    double fc = job->friction[j], v = d->qvel[j];
    if (!(fc > 0)) { state[j] = 0.0; continue; }
    double target = v > 0 ? fc : (v < 0 ? -fc : 0.0);
    state[j] = target + (state[j] - target) * exp(-job->law_p[(size_t)j * LAW_COLS] * fabs(v) * dt / fc);
  }
}

/* the load law's budget Fc + |k_ext tau_ext - k_motor tau_motor| (law_p: k_motor, k_ext), written into the friction
   rows mj_step1 built and into the model (for the substeps) */
static void load_budget(mjModel* m, mjData* d, const SysidReplayJob* job, const double* applied) {
  int nv = m->nv;
  double g[MAXV], b[MAXV];
  for (int j = 0; j < nv; j++) g[j] = 0.0;
  if (job->load_gravity != 0.0) {
    double grav[3] = {0.0, 0.0, -job->load_gravity};
    gravity_force_of(m, d, grav, g);
  }
  for (int j = 0; j < nv; j++) {
    const double* p = job->law_p + (size_t)j * LAW_COLS;
    /* the gravity the replay does not simulate loads the joint, and the real motor holds it */
    double ext = -d->qfrc_bias[j] + g[j], mot = applied[j] - g[j];
    double v = job->friction[j] + fabs(p[1] * ext - p[0] * mot);
    b[j] = v > LOAD_BUDGET_FLOOR ? v : LOAD_BUDGET_FLOOR;
    m->dof_frictionloss[j] = b[j];
  }
  for (int i = 0; i < d->nefc; i++)
    if (d->efc_type[i] == mjCNSTR_FRICTION_DOF) d->efc_frictionloss[i] = b[d->efc_id[i]];
  /* the constraint islands' sorted copy (mj_island), which the solver reads when islands are on */
  if (d->nisland > 0)
    for (int i = 0; i < d->nefc; i++)
      if (d->iefc_type[i] == mjCNSTR_FRICTION_DOF) d->iefc_frictionloss[i] = b[d->iefc_id[i]];
}

static int bad_state(const mjModel* m, const mjData* d, double vmax) {
  if (d->warning[mjWARN_BADQACC].number || d->warning[mjWARN_BADQVEL].number ||
      d->warning[mjWARN_BADQPOS].number)
    return 1;
  for (int j = 0; j < m->nv; j++) {
    double v = d->qvel[j];
    if (!(fabs(v) <= vmax) || !isfinite(d->qpos[j])) return 1;
  }
  return 0;
}

static void fill_nan(const SysidReplayJob* job, int from, int n) {
  double nan = NAN;
  for (int s = from; s < job->n_samples; s++) {
    for (int j = 0; j < n; j++) {
      job->out_q[s * n + j] = nan; job->out_dq[s * n + j] = nan;
      if (job->out_tau) job->out_tau[s * n + j] = nan;
      if (job->out_tau_cmd) job->out_tau_cmd[s * n + j] = nan;
    }
    for (int i = 0; i < 3; i++) job->out_pos[s * 3 + i] = nan;
    if (job->out_quat) for (int i = 0; i < 4; i++) job->out_quat[s * 4 + i] = nan;
  }
}

/* the servo's motor torque on joint j: firmware duty from the goal, current window, duty clip, DC motor */
static double servo_torque(const SysidReplayJob* job, int j, double goal, double enable, double vin, double q, double dq) {
  const double* c = job->servo_p + (size_t)j * SERVO_COLS;
  double eg = c[0], max_pwm = c[1], imax = c[2], kt = c[4], R = c[5];
  double V = isfinite(vin) && vin > 0 ? vin : c[3];
  double duty = eg * job->kp[j] * (goal - q);
  if (imax > 0) {
    double mid = kt * dq / V, half = R * imax / V;
    if (duty < mid - half) duty = mid - half; else if (duty > mid + half) duty = mid + half;
  }
  if (duty > max_pwm) duty = max_pwm; else if (duty < -max_pwm) duty = -max_pwm;
  return enable > 0.5 ? kt * (duty * V - kt * dq) / R : 0.0;
}

/* Returns 0 on success, 1 if the simulation diverged (rest of the samples NaN), <0 on bad input. */
int sysid_replay(mjModel* m, mjData* d, SysidReplayJob* job) {
  int nv = m->nv;
  if (nv > MAXV || m->nq != nv) return -1;
  const int torque_mode = job->controller == CTRL_TORQUE;
  if (job->n_samples <= 0 || job->substeps < 1 || job->delay < 0 || !(job->tick_s > 0)) return -2;
  if (torque_mode ? (job->torque_ff == NULL || job->n_torque <= 0) : job->n_setpoints <= 0) return -2;
  const int servo_mode = job->controller == CTRL_SERVO;
  if (servo_mode && (job->servo_p == NULL || job->sp_dim != 3 * nv)) return -5;
  if (!torque_mode && job->sample_tick[0] < -job->warmup) return -3;
  const int law = job->fric_law;
  if (law < FRIC_COULOMB || law > FRIC_DAHL || (law != FRIC_COULOMB && job->law_p == NULL)) return -4;
  for (int j = 0; j < nv; j++) {
    m->dof_armature[j] = job->armature[j];
    /* a force law replaces the constraint: the Dahl level is its saturation, the sigmoid has no budget */
    m->dof_frictionloss[j] = law == FRIC_DAHL || law == FRIC_SIGMOID ? 0.0 : job->friction[j];
    m->dof_damping[j] = job->viscous[j];
  }
  m->opt.gravity[0] = 0; m->opt.gravity[1] = 0; m->opt.gravity[2] = -job->gravity;
  m->opt.timestep = job->tick_s / job->substeps;
  mj_setConst(m, d);
  mj_resetData(m, d);
  for (int j = 0; j < nv; j++) { d->qpos[j] = job->q_init[j]; d->qvel[j] = job->qd_init ? job->qd_init[j] : 0; }

  const int64_t k0 = torque_mode ? job->sample_tick[0] : -(int64_t)job->warmup;
  const int64_t k_last = job->sample_tick[job->n_samples - 1];
  const int stribeck = law == FRIC_STRIBECK;
  double fric_f[MAXV], dahl[MAXV];
  for (int j = 0; j < nv; j++) { fric_f[j] = 0.0; dahl[j] = 0.0; }
  const int D = job->sp_dim;
  const int hist = job->delay + 1;
  double* cmd_hist = (double*)calloc((size_t)hist * nv, sizeof(double));
  double* jac = (double*)malloc(sizeof(double) * 6 * nv);
  double tau[MAXV], applied[MAXV], prev[MAXV];
  for (int j = 0; j < nv; j++) prev[j] = 0.0;
  int sp_cur = 0, sp_del = 0, s = 0, ret = 0;

  for (int64_t k = k0; k <= k_last; k++) {
    if (stribeck) set_friction(m, job, d);
    if (law == FRIC_LOAD)  /* the rows exist: the budget after the controller overwrites them */
      for (int j = 0; j < nv; j++) m->dof_frictionloss[j] = job->friction[j] > LOAD_BUDGET_FLOOR ? job->friction[j] : LOAD_BUDGET_FLOOR;
    mj_step1(m, d);
    /* controller: setpoint active at k (joint_pd: target delayed by d ticks) */
    if (!torque_mode) sp_cur = active_setpoint(job, k, sp_cur);
    if (torque_mode) {
      /* the measured torque of tick k (before the delay) and the one acting now (k - delay) */
      int64_t kc = k < 0 ? 0 : (k >= job->n_torque ? job->n_torque - 1 : k);
      int64_t ka = k - job->delay;
      ka = ka < 0 ? 0 : (ka >= job->n_torque ? job->n_torque - 1 : ka);
      memcpy(tau, job->torque_ff + (size_t)kc * nv, sizeof(double) * nv);
      memcpy(applied, job->torque_ff + (size_t)ka * nv, sizeof(double) * nv);
    } else if (job->controller == CTRL_JOINT_PD) {
      int64_t kd = k - job->delay;
      if (kd < k0) kd = k0;
      sp_del = active_setpoint(job, kd, sp_del);
      const double* sp = job->sp_val + (size_t)sp_del * D;
      for (int j = 0; j < nv; j++) tau[j] = job->kp[j] * (sp[j] - d->qpos[j]) - job->kd[j] * d->qvel[j];
      for (int j = 0; j < nv; j++) applied[j] = tau[j];
    } else if (servo_mode) {
      int64_t kd = k - job->delay;  /* the bus delay: the goal row reaches the firmware d ticks late */
      if (kd < k0) kd = k0;
      sp_del = active_setpoint(job, kd, sp_del);
      const double* sp = job->sp_val + (size_t)sp_del * D;
      for (int j = 0; j < nv; j++)
        tau[j] = servo_torque(job, j, sp[j], sp[nv + j], sp[2 * nv + j], d->qpos[j], d->qvel[j]);
      for (int j = 0; j < nv; j++) applied[j] = tau[j];
    } else {
      const double* sp = job->sp_val + (size_t)sp_cur * D;
      task_impedance(m, d, job, sp, jac, tau);
      /* commanded effort delayed by d ticks; before the start the first command is held */
      int64_t i = k - k0;
      double* slot = cmd_hist + (size_t)(i % hist) * nv;
      if (i == 0) {
        for (int h = 0; h < hist; h++) memcpy(cmd_hist + (size_t)h * nv, tau, sizeof(double) * nv);
      } else {
        memcpy(slot, tau, sizeof(double) * nv);
      }
      int64_t id = i - job->delay;
      if (id < 0) id = 0;
      memcpy(applied, cmd_hist + (size_t)(id % hist) * nv, sizeof(double) * nv);
    }
    /* the measured torque is what acted: no slew limit or clamp on it */
    if (job->slew && !torque_mode && !servo_mode) {
      for (int j = 0; j < nv; j++) {
        double lim = job->slew_per_tick[j], dlt = applied[j] - prev[j];
        if (dlt > lim) dlt = lim; else if (dlt < -lim) dlt = -lim;
        applied[j] = prev[j] + dlt;
      }
    }
    if (job->clamp && !torque_mode && !servo_mode) {
      for (int j = 0; j < nv; j++) {
        double lim = job->tau_max[j];
        if (applied[j] > lim) applied[j] = lim; else if (applied[j] < -lim) applied[j] = -lim;
      }
    }
    for (int j = 0; j < nv; j++) prev[j] = applied[j];
    /* sample at this tick: state before the step, torque applied during it */
    if (s < job->n_samples && job->sample_tick[s] == k) {
      memcpy(job->out_q + (size_t)s * nv, d->qpos, sizeof(double) * nv);
      memcpy(job->out_dq + (size_t)s * nv, d->qvel, sizeof(double) * nv);
      memcpy(job->out_pos + (size_t)s * 3, d->site_xpos + 3 * job->site_id, sizeof(double) * 3);
      if (job->out_quat) {
        double qw[4];
        mju_mat2Quat(qw, d->site_xmat + 9 * job->site_id);
        if (qw[0] < 0) for (int i = 0; i < 4; i++) qw[i] = -qw[i];
        double* oq = job->out_quat + (size_t)s * 4;
        oq[0] = qw[1]; oq[1] = qw[2]; oq[2] = qw[3]; oq[3] = qw[0];
      }
      if (job->out_tau) memcpy(job->out_tau + (size_t)s * nv, applied, sizeof(double) * nv);
      if (job->out_tau_cmd) memcpy(job->out_tau_cmd + (size_t)s * nv, tau, sizeof(double) * nv);
      s++;
    }
    if (k == k_last) break;
    /* the force laws' torque of this tick (held over its substeps); the load law's budget from its torques */
    if (law == FRIC_SIGMOID) sigmoid_force(job, d, nv, fric_f);
    if (law == FRIC_DAHL) {
      for (int j = 0; j < nv; j++) fric_f[j] = -dahl[j];
      dahl_step(job, d, nv, job->tick_s, dahl);
    }
    if (law == FRIC_LOAD) load_budget(m, d, job, applied);
    if (job->disturbance) {
      const double* w = job->disturbance + (size_t)(k - k0) * nv;
      for (int j = 0; j < nv; j++) d->qfrc_applied[j] = applied[j] + w[j] + fric_f[j];
    } else {
      for (int j = 0; j < nv; j++) d->qfrc_applied[j] = applied[j] + fric_f[j];
    }
    mj_step2(m, d);
    for (int sub = 1; sub < job->substeps; sub++) {
      if (stribeck) set_friction(m, job, d);
      mj_step(m, d);
    }
    if (bad_state(m, d, job->max_qvel)) {
      job->diverged_tick = k + 1;
      fill_nan(job, s, nv);
      ret = 1;
      break;
    }
  }
  if (law != FRIC_COULOMB) for (int j = 0; j < nv; j++) m->dof_frictionloss[j] = job->friction[j];
  free(cmd_hist);
  free(jac);
  return ret;
}
